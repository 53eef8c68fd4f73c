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
//! | `{slack}`       | 1500 ms                                          | CI-safe margin on timings    |
//!
//! A role whose D is below [`INTERRUPT_FLOOR`] is too fast to interrupt: scenarios that use
//! `{budget}` or `{half_budget}` with it are skipped with that reason (and the reason says so).
//! Calibration is computed once per role even when scenarios run in parallel: the first
//! scenario that needs it computes it while the others wait.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::Duration;

use serde_json::Value;

use crate::outcome::millis;

/// Below this D a role's work cannot be interrupted reliably.
pub const INTERRUPT_FLOOR: Duration = Duration::from_millis(1200);
/// The smallest `{budget}`.
pub const MIN_BUDGET: Duration = Duration::from_millis(300);
/// `{slack}`: the margin on timing checks (the seed's own margin is 1 s; CI machines are noisy).
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
    /// The sandbox it ran in (for redaction of paths).
    pub sandbox_root: PathBuf,
}

impl Calibration {
    /// `{budget}`.
    pub fn budget(&self) -> Duration {
        let quarter = self.duration / 4;
        let ms = millis(quarter.max(MIN_BUDGET));
        Duration::from_millis(ms.div_ceil(10) * 10)
    }

    /// Whether the work is long enough to interrupt.
    pub fn interruptible(&self) -> bool {
        self.duration >= INTERRUPT_FLOOR
    }

    /// A calibration variable by name.
    pub fn var(&self, name: &str) -> Option<Duration> {
        Some(match name {
            "calibrated" => self.duration,
            "budget" => self.budget(),
            "half_budget" => self.budget() / 2,
            "long_budget" => self.duration * 3 + Duration::from_secs(2),
            "slack" => SLACK,
            _ => return None,
        })
    }

    /// One line for reports: `detach: D = 3400 ms, {budget} = 850 ms`.
    pub fn describe(&self) -> String {
        format!(
            "calibrated role `{}`: --budget 0 took {} ms (exit {}), {{budget}} = {} ms",
            self.role,
            millis(self.duration),
            self.exit_code,
            millis(self.budget())
        )
    }

    /// The skip reason when the role is too fast to interrupt.
    pub fn too_fast_reason(&self) -> String {
        format!(
            "role `{}` is too fast to interrupt: its work took {} ms with --budget 0, below {} ms; give it more work",
            self.role,
            millis(self.duration),
            millis(INTERRUPT_FLOOR)
        )
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
