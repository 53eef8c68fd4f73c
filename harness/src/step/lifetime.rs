//! How long the work lives: `no-processes` (no process of the sandbox is alive within a bound,
//! e.g. after a cancel or a timeout ended the job) and `elapsed-since` (a bound on the time
//! since an earlier step started, e.g. a whole continue loop measured from the first call).
//!
//! Both read the clock and the process table only; the bound is the scenario's duration
//! expression, relative to what conform measured of the tool.

use std::time::{Duration, Instant};

use super::{ScenarioState, StepResult};
use crate::outcome::{Finding, FindingKind, millis};
use crate::sandbox::{self, LeakedProcess};
use crate::scenario::{ElapsedSinceStep, NoProcessesStep};

/// How often the process table is read while waiting for the processes to go.
const POLL: Duration = Duration::from_millis(50);

/// The most processes a finding lists (the report stays small).
const LISTED: usize = 5;

impl ScenarioState<'_> {
    /// `action = "no-processes"`: polls the processes carrying the sandbox marker until none
    /// is left, or the bound passed; processes still alive then are the finding (they are left
    /// to the clean-up and the sweep, which stop them).
    pub(super) fn run_no_processes(&mut self, s: &NoProcessesStep) -> StepResult {
        let within = self.duration(&s.within)?;
        let deadline = Instant::now() + within;
        let mut alive = sandbox::scan(&self.marker);
        while !alive.is_empty() && Instant::now() < deadline {
            super::stop::gate()?;
            std::thread::sleep(POLL);
            alive = sandbox::scan(&self.marker);
        }
        if alive.is_empty() {
            return Ok(Vec::new());
        }
        Ok(vec![
            Finding::new(
                FindingKind::ProcessesAlive,
                format!(
                    "{} process(es) of the job still ran {} ms after the step began",
                    alive.len(),
                    millis(within)
                ),
            )
            .expected(format!("no process of the sandbox alive within {} ms", millis(within)))
            .actual(describe(&alive))
            .at_step(s.name.clone()),
        ])
    }

    /// `action = "elapsed-since"`: the time since step `since` started is at most `at_most`.
    pub(super) fn run_elapsed_since(&mut self, s: &ElapsedSinceStep) -> StepResult {
        let bound = self.duration(&s.at_most)?;
        let Some(started) = self.started.get(&s.since) else {
            return Err(format!("step `{}` has not started", s.since).into());
        };
        let elapsed = started.elapsed();
        if elapsed <= bound {
            return Ok(Vec::new());
        }
        Ok(vec![
            Finding::new(
                FindingKind::Elapsed,
                format!(
                    "{} ms passed since step `{}` began, more than {} ms",
                    millis(elapsed),
                    s.since,
                    millis(bound)
                ),
            )
            .expected(format!("≤ {} ms since `{}` began", millis(bound), s.since))
            .actual(format!("{} ms", millis(elapsed)))
            .at_step(s.name.clone()),
        ])
    }
}

/// The processes, each as its pid, age and command line; at most [`LISTED`].
fn describe(alive: &[LeakedProcess]) -> String {
    let mut parts: Vec<String> = alive
        .iter()
        .take(LISTED)
        .map(|p| {
            let age = p.age.map(|a| format!(", {} ms old", millis(a))).unwrap_or_default();
            let line: String = p.cmdline.join(" ").chars().take(200).collect();
            format!("pid {}{age}: {line}", p.pid)
        })
        .collect();
    if alive.len() > LISTED {
        parts.push(format!("and {} more", alive.len() - LISTED));
    }
    parts.join("; ")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use crate::catalogue::parse_scenario;

    #[test]
    fn a_marked_process_is_described_by_pid_and_command_line() {
        let marker = format!("lifetime-test-{}", std::process::id());
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(crate::sandbox::MARKER_VAR, &marker)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut found = sandbox::scan(&marker);
        while found.is_empty() && Instant::now() < deadline {
            std::thread::sleep(POLL);
            found = sandbox::scan(&marker);
        }
        let text = describe(&found);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(text.contains(&format!("pid {}", child.id())), "{text}");
        assert!(text.contains("sleep 30"), "{text}");
        // Gone once reaped: the next scan is empty.
        assert!(sandbox::scan(&marker).is_empty());
    }

    const HEAD: &str = "id = \"s\"\nrequirement = \"REQ-F-081\"\ncriterion = \"c\"\nlevel = \"must\"\nroles = [\"detach_only\"]\n";

    fn parse(steps: &str) -> Result<(), String> {
        parse_scenario("REQ-F-081/s.toml", &format!("{HEAD}{steps}"))
            .map(|_| ())
            .map_err(|e| e.message)
    }

    #[test]
    fn the_lifetime_steps_refer_to_earlier_steps_and_verify_compares_with_a_verify() {
        let run = "[[steps]]\naction = \"run\"\nname = \"call\"\nrole = \"detach_only\"\n";
        let since = "[[steps]]\naction = \"elapsed-since\"\nname = \"t\"\nsince = \"call\"\nat_most = \"{budget} + {slack}\"\n";
        let gone = "[[steps]]\naction = \"no-processes\"\nname = \"g\"\nwithin = \"{cadence} + {slack}\"\n";
        let first = "[[steps]]\naction = \"verify\"\nname = \"v1\"\nunlike_calibrated = true\n";
        let second = "[[steps]]\naction = \"verify\"\nname = \"v2\"\nsame_as = \"v1\"\n";
        parse(&format!("{run}{since}{gone}{first}{second}")).unwrap();
        let early = parse(&format!("{since}{run}")).unwrap_err();
        assert!(early.contains("`since` `call` is not an earlier step"), "{early}");
        let not_verify = parse(&format!(
            "{run}[[steps]]\naction = \"verify\"\nname = \"v\"\nsame_as = \"call\"\n"
        ))
        .unwrap_err();
        assert!(not_verify.contains("`same_as` must name a verify step"), "{not_verify}");
        let when = "[[steps]]\naction = \"verify\"\nname = \"v3\"\nwhen_ended = \"call\"\nunless_ended = [\"call\"]\n";
        parse(&format!("{run}{when}")).unwrap();
        let not_run = parse(&format!(
            "{run}{first}[[steps]]\naction = \"verify\"\nname = \"v\"\nwhen_ended = \"v1\"\n"
        ))
        .unwrap_err();
        assert!(not_run.contains("`when_ended` must name run or continue steps"), "{not_run}");
        let later = parse(&format!(
            "[[steps]]\naction = \"verify\"\nname = \"v\"\nunless_ended = [\"call\"]\n{run}"
        ))
        .unwrap_err();
        assert!(later.contains("`unless_ended` `call` is not an earlier step"), "{later}");
        let bad = parse("[[steps]]\naction = \"no-processes\"\nname = \"g\"\nwithin = \"soon\"\n")
            .unwrap_err();
        assert!(bad.contains("not a duration"), "{bad}");
    }

    #[test]
    fn a_verify_step_compares_with_the_calibration_unless_told_otherwise() {
        let step = |same_as: Option<&str>, unlike: Option<bool>| crate::scenario::VerifyStep {
            name: "v".into(),
            same_as: same_as.map(str::to_owned),
            unlike_calibrated: unlike,
            when_ended: None,
            unless_ended: Vec::new(),
        };
        assert!(step(None, None).compares_with_calibration());
        assert!(step(None, Some(false)).compares_with_calibration());
        assert!(!step(None, Some(true)).compares_with_calibration());
        assert!(!step(Some("v0"), None).compares_with_calibration());
    }
}
