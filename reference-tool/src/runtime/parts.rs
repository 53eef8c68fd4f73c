//! The parts of the job runtime a tool chooses: how jobs are keyed and named
//! ([`JobNaming`]), where their progress is published ([`ProgressSink`]), and how their
//! worker starts ([`Launcher`]). The framework builds every job store and starts every worker
//! from the [`Parts`] its tool was built with; reftool's are [`Parts::default`].

use std::path::PathBuf;
use std::sync::Arc;

use super::identity::{JobNaming, RandomIds};
use super::jobs::JobStore;
use super::progress::{ProgressJson, ProgressSink};
use super::worker::{Launcher, Reexec};

/// See the module docs.
#[derive(Debug, Clone)]
pub struct Parts {
    /// How jobs are keyed and named.
    pub naming: Arc<dyn JobNaming>,
    /// Where the work's progress goes.
    pub progress: Arc<dyn ProgressSink>,
    /// How a detached job's worker starts.
    pub launcher: Arc<dyn Launcher>,
}

impl Default for Parts {
    /// reftool's: keys of the whole identity and random ids ([`RandomIds`]), `progress.json`
    /// ([`ProgressJson`]), the worker by re-executing this binary ([`Reexec`]).
    fn default() -> Self {
        Parts {
            naming: Arc::new(RandomIds),
            progress: Arc::new(ProgressJson),
            launcher: Arc::new(Reexec),
        }
    }
}

impl Parts {
    /// The job store under `state_dir`, naming and publishing with these parts.
    pub fn job_store(&self, state_dir: impl Into<PathBuf>) -> JobStore {
        JobStore::new(state_dir)
            .named_by(Arc::clone(&self.naming))
            .publishing_to(Arc::clone(&self.progress))
    }
}
