//! Stage: calibrate. Each profile role runs once per run with `--budget 0` (without it when
//! the role's command declares no interruption, since it then has no such flag); its duration
//! D and final response are cached for every scenario, and the budgets the scenarios use
//! derive from D, so the suite is as fast as the tool and independent of the machine's speed.
//!
//! | variable        | value                                           | why                          |
//! |-----------------|-------------------------------------------------|------------------------------|
//! | `{calibrated}`  | D, the `--budget 0` run's duration              |                              |
//! | `{budget}`      | max(D / 4, 300 ms), rounded up to 10 ms          | interrupts early in the work |
//! | `{half_budget}` | `{budget}` / 2                                   | to act before the budget ends |
//! | `{long_budget}` | 3 × D + 2 s                                       | the work surely ends in it   |
//! | `{cadence}`     | min(D, 10 s)                                      | the longest gap the spec allows between two checkpoints or progress reports of this work |
//! | `{slack}`       | 1500 ms                                          | CI-safe margin on timings    |
//! | `{startup}`     | how long the manifest command took (once per run) | "at once" for this tool      |
//!
//! A role whose D is below [`INTERRUPT_FLOOR`] is too fast to interrupt: scenarios that use
//! `{budget}` or `{half_budget}` with it are skipped with that reason (and the reason says so).
//! Calibration is computed once per role even when scenarios run in parallel: the first
//! scenario that needs it computes it while the others wait.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::discover::Subject;
use crate::exec::{self, Program, Termination};
use crate::outcome::{Note, SkipReason, millis};
use crate::prepare::{self, Needs};

/// Bound on a calibration run.
pub const CALIBRATION_LIMIT: Duration = Duration::from_secs(600);

/// Below this D a role's work cannot be interrupted reliably.
pub const INTERRUPT_FLOOR: Duration = Duration::from_millis(1200);
/// Below this D the `long_work` role cannot show REQ-C-034's 10 s between two progress
/// reports: ten seconds of work, conform's slack and the tool's start-ups must fit in it.
pub const LONG_WORK_FLOOR: Duration = Duration::from_millis(12_000);
/// The smallest `{budget}`.
pub const MIN_BUDGET: Duration = Duration::from_millis(300);
/// The longest the spec lets a command go between two progress reports (REQ-C-034) or two
/// checkpoints (REQ-C-035): at least one every 10 s of work.
pub const SPEC_CADENCE: Duration = Duration::from_secs(10);
/// `{slack}`: the margin on timing checks (REQ-F-080's own example allows 1 s; CI machines are noisy).
pub const SLACK: Duration = Duration::from_millis(1500);

/// The measured character of one role.
#[derive(Debug, Clone)]
pub struct Calibration {
    /// The role.
    pub role: String,
    /// D: how long the `--budget 0` run took.
    pub duration: Duration,
    /// Its exit code.
    pub exit_code: i32,
    /// Its response (one JSON document on stdout).
    pub response: Value,
    /// Whether it ran with `--budget 0`: its command declares interruption. A plain command
    /// has no such flag and ran as it is (REQ-F-080).
    pub with_budget_zero: bool,
    /// The sandbox it ran in (for redaction of paths).
    pub sandbox_root: PathBuf,
    /// What the role's `verify` printed after this run (`None`: the role has no `verify`;
    /// `Err`: it failed, and why).
    pub effect: Option<Result<String, String>>,
}

impl Calibration {
    /// `{budget}`.
    pub fn budget(&self) -> Duration {
        let quarter = self.duration / 4;
        let ms = millis(quarter.max(MIN_BUDGET));
        Duration::from_millis(ms.div_ceil(10) * 10)
    }

    /// `{cadence}`: the longest gap the spec allows between two checkpoints or progress
    /// reports of this work, [`SPEC_CADENCE`], or the whole work when it is shorter (nothing
    /// makes a command report or checkpoint before its end then). A stop asked for by the
    /// budget or a cancel may wait that long for the next safe point.
    pub fn cadence(&self) -> Duration {
        self.duration.min(SPEC_CADENCE)
    }

    /// Whether the work is long enough to interrupt (for `long_work`, long enough for its
    /// scenarios: [`LONG_WORK_FLOOR`]).
    pub fn interruptible(&self) -> bool {
        self.duration >= self.floor()
    }

    /// The shortest D the role's scenarios can use.
    pub fn floor(&self) -> Duration {
        match self.role.as_str() {
            "long_work" => LONG_WORK_FLOOR,
            _ => INTERRUPT_FLOOR,
        }
    }

    /// A calibration variable by name.
    pub fn var(&self, name: &str) -> Option<Duration> {
        Some(match name {
            "calibrated" => self.duration,
            "budget" => self.budget(),
            "half_budget" => self.budget() / 2,
            // An environment value is no expression: `2 * {budget}` has to be a variable there.
            "double_budget" => self.budget() * 2,
            "long_budget" => self.duration * 3 + Duration::from_secs(2),
            "cadence" => self.cadence(),
            "slack" => SLACK,
            _ => return None,
        })
    }

    /// What the duration variable `name` is worth, in words: the formula [`Calibration::var`]
    /// computes (and, for `{slack}`, `{startup}`, `{idle_timeout}` and `{max_lifetime}`, where the step stage
    /// takes it). `conform explain` prints it beside each variable a scenario uses.
    pub fn formula(name: &str) -> Option<&'static str> {
        Some(match name {
            "calibrated" => "D, how long the primary role's calibration run (`--budget 0`) took",
            "budget" => "max(D / 4, 300 ms), rounded up to 10 ms",
            "half_budget" => "{budget} / 2",
            "double_budget" => "2 × {budget}",
            "long_budget" => "3 × D + 2 s",
            "cadence" => {
                "min(D, 10 s): the longest the spec lets checkpoints and progress reports be apart"
            }
            "slack" => "1500 ms, the margin on timings (no calibration)",
            "startup" => "how long the tool's manifest command took at discovery (once per run)",
            "idle_timeout" => {
                "the `interruption.idle_timeout_ms` the primary role's command declares (REQ-F-081's 300000 ms when none)"
            }
            "max_lifetime" => {
                "the `interruption.max_lifetime_ms` the primary role's command declares (REQ-F-081's 3600000 ms when none)"
            }
            _ => return None,
        })
    }

    /// One line for reports: `detach: D = 3400 ms, {budget} = 850 ms`.
    pub fn describe(&self) -> Note {
        Note::Calibrated {
            role: self.role.clone(),
            took_ms: millis(self.duration),
            exit_code: self.exit_code,
            budget_ms: millis(self.budget()),
        }
    }

    /// The skip reason when the role is too fast to interrupt (or, for a plain command, too
    /// short to send a signal or a timeout into).
    pub fn too_fast_reason(&self) -> SkipReason {
        SkipReason::TooFastToInterrupt {
            role: self.role.clone(),
            took_ms: millis(self.duration),
            floor_ms: millis(self.floor()),
            with_budget_zero: self.with_budget_zero,
        }
    }
}

type Cell = Arc<OnceLock<Result<Arc<Calibration>, String>>>;

/// The per-run cache of calibrations, shared by every worker thread.
#[derive(Debug, Default)]
pub struct Calibrator {
    cells: Mutex<BTreeMap<String, Cell>>,
}

impl Calibrator {
    /// An empty cache.
    pub fn new() -> Self {
        Self::default()
    }

    /// The calibration of `role`, computing it with `measure` if no scenario did yet. Concurrent
    /// callers for the same role wait for the first one; a failure is cached too (it would
    /// fail again).
    pub fn get(
        &self,
        role: &str,
        measure: impl FnOnce() -> Result<Calibration, String>,
    ) -> Result<Arc<Calibration>, String> {
        let cell = {
            let mut cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
            cells.entry(role.to_owned()).or_default().clone()
        };
        cell.get_or_init(|| measure().map(Arc::new)).clone()
    }

    /// Every calibration computed so far (for the report).
    pub fn computed(&self) -> Vec<Result<Arc<Calibration>, String>> {
        let cells = self.cells.lock().unwrap_or_else(PoisonError::into_inner);
        cells.values().filter_map(|c| c.get().cloned()).collect()
    }
}

/// Measures a role: its invocation with `--budget 0` (plainly when its command declares no
/// interruption) in a sandbox prepared for it; `keep` keeps that sandbox.
pub fn measure(subject: &Subject, role_name: &str, keep: bool) -> Result<Calibration, String> {
    let role = subject.profile.role(role_name).ok_or_else(|| format!("no role `{role_name}`"))?;
    let roles = [role_name];
    let needs = Needs { roles: &roles, ..Needs::default() };
    let sandbox = prepare::prepare(&subject.tool, &subject.profile, &needs, keep)
        .map_err(|e| e.to_string())?;
    let mut argv = subject.tool.argv();
    argv.extend(role.argv.iter().cloned());
    // A role whose command declares no interruption has no --budget flag (docs/contract.md §2):
    // its plain run is its calibration.
    let interruptible =
        subject.commands.command_for_args(&role.argv).is_none_or(|(_, info)| info.interruptible());
    if interruptible {
        argv.extend(["--budget".to_owned(), "0".to_owned()]);
    }
    let mut inv = sandbox.invocation(Program::Argv(argv.iter().map(OsString::from).collect()));
    for (k, v) in crate::profile::render_env(&role.env, sandbox.root(), &sandbox.work()) {
        inv.env.insert(k.into(), v.into());
    }
    inv.stdin = role.stdin_mode();
    inv.timeout = CALIBRATION_LIMIT;
    crate::interrupt::gate().map_err(|e| e.to_string())?;
    let outcome = exec::run(&inv).map_err(|e| format!("calibration of role `{role_name}`: {e}"))?;
    let Termination::Exited(exit_code) = outcome.termination else {
        return Err(format!(
            "calibration of role `{role_name}` (--budget 0) did not exit by itself: {:?}",
            outcome.termination
        ));
    };
    let response = crate::observe::parse_stdout(&outcome).map_err(|p| {
        format!("calibration of role `{role_name}` (--budget 0) gave no JSON response: {p:?}")
    })?;
    // A role is work that succeeds, but for the `failing` role, whose work must end in a
    // failure of its own; the other way round is a profile (or tool) problem that would make
    // every comparison meaningless.
    let fits = crate::scenario::calibration_exit_fits(role_name, exit_code);
    if !fits && crate::scenario::role_fails(role_name) {
        return Err(format!(
            "calibration of role `{role_name}` (--budget 0) exited {exit_code}: the role is work that fails with an exit of its own; check the role's argv, fixtures and setup"
        ));
    } else if !fits {
        let detail = response
            .pointer("/error/message")
            .and_then(Value::as_str)
            .unwrap_or("no error message");
        return Err(format!(
            "calibration of role `{role_name}` (--budget 0) exited {exit_code}: {detail}; check the role's argv, fixtures and setup"
        ));
    }
    // The state the uninterrupted work leaves: what every interrupted path must leave too.
    let effect = role.verify.as_ref().map(|line| effect_of(line, &sandbox.env(), &sandbox.work()));
    Ok(Calibration {
        role: role_name.to_owned(),
        duration: outcome.elapsed,
        exit_code,
        response,
        with_budget_zero: interruptible,
        sandbox_root: sandbox.root().to_path_buf(),
        effect,
    })
}

/// Bound on a `verify` command.
pub const VERIFY_LIMIT: Duration = Duration::from_secs(60);

/// Runs a role's `verify` line (`sh -c` in `work`, with the sandbox's environment) and returns
/// its stdout with trailing whitespace trimmed; `Err` says how it failed.
pub fn effect_of(
    line: &str,
    env: &BTreeMap<OsString, OsString>,
    work: &std::path::Path,
) -> Result<String, String> {
    let mut inv =
        exec::Invocation::new(Program::Shell(line.to_owned()), env.clone(), work.to_path_buf());
    inv.timeout = VERIFY_LIMIT;
    let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
    let stdout = String::from_utf8_lossy(&outcome.stdout.bytes).trim_end().to_owned();
    match outcome.termination {
        Termination::Exited(0) => Ok(stdout),
        other => Err(format!(
            "{}: {}",
            crate::outcome::Ended::from(other),
            String::from_utf8_lossy(&outcome.stderr.bytes).trim()
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calibration(took_ms: u64, with_budget_zero: bool) -> Calibration {
        Calibration {
            role: "plain_slow".into(),
            duration: Duration::from_millis(took_ms),
            exit_code: 0,
            response: Value::Null,
            with_budget_zero,
            sandbox_root: PathBuf::from("/tmp/x"),
            effect: None,
        }
    }

    #[test]
    fn a_short_plain_role_is_too_short_for_a_signal_not_too_fast_to_interrupt() {
        let plain = calibration(400, false).too_fast_reason().to_string();
        assert!(plain.contains("too short to send a signal or a timeout into"), "{plain}");
        assert!(plain.contains("400 ms") && plain.contains("1200 ms"), "{plain}");
        assert!(!plain.contains("with --budget 0") && !plain.contains("interrupt:"), "{plain}");
        let interruptible = calibration(400, true).too_fast_reason().to_string();
        assert!(interruptible.contains("too fast to interrupt"), "{interruptible}");
        assert!(interruptible.contains("with --budget 0"), "{interruptible}");
    }

    #[test]
    fn only_the_failing_role_calibrates_on_a_failure_of_its_own() {
        use crate::scenario::calibration_exit_fits;
        assert!(calibration_exit_fits("detach", 0));
        assert!(!calibration_exit_fits("detach", 4));
        assert!(calibration_exit_fits("failing", 4));
        assert!(calibration_exit_fits("failing", 1));
        // Success, or a hand-off, is no failure: the role cannot show one through job wait.
        assert!(!calibration_exit_fits("failing", 0));
        assert!(!calibration_exit_fits("failing", 14));
    }

    #[test]
    fn the_long_work_role_needs_twelve_seconds_and_says_so() {
        let mut long = calibration(11_000, true);
        long.role = "long_work".into();
        assert!(!long.interruptible(), "11 s is enough for any other role, not for this one");
        let reason = long.too_fast_reason();
        assert!(reason.vendor_can_fix(), "the vendor named the role: its gap counts");
        let text = reason.to_string();
        assert!(
            text.contains("too short for its scenarios") && text.contains("12000 ms"),
            "{text}"
        );
        long.duration = Duration::from_millis(12_500);
        assert!(long.interruptible());
        assert!(calibration(1_300, true).interruptible(), "other roles keep their floor");
    }

    #[test]
    fn the_cadence_is_the_spec_s_ten_seconds_or_the_whole_shorter_work() {
        assert_eq!(calibration(2500, true).var("cadence"), Some(Duration::from_millis(2500)));
        assert_eq!(calibration(60_000, true).var("cadence"), Some(SPEC_CADENCE));
    }
}
