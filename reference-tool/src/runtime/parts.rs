//! The parts of the job runtime a tool chooses: how jobs are keyed and named
//! ([`JobNaming`]), where their progress is published ([`ProgressSink`]), how their worker
//! starts ([`Launcher`]), how their checkpoints are made durable ([`CheckpointCommit`]), and how
//! a call hears SIGINT and SIGHUP ([`CancelSignals`]). The framework builds every job store,
//! starts every worker and listens for every cancellation with the [`Parts`] its tool was built
//! with; reftool's are [`Parts::default`].

use std::path::PathBuf;
use std::sync::Arc;

use super::cancel::{CancelSignals, SecondSignalExits};
use super::checkpoint::{CheckpointCommit, OneStep};
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
    /// How a safe point makes its checkpoint durable.
    pub checkpoints: Arc<dyn CheckpointCommit>,
    /// How a call hears the signals that cancel it.
    pub cancel: Arc<dyn CancelSignals>,
}

impl Default for Parts {
    /// reftool's: keys of the whole identity and random ids ([`RandomIds`]), `progress.json`
    /// ([`ProgressJson`]), the worker by re-executing this binary ([`Reexec`]), a checkpoint
    /// in one atomic write or one transaction with its units ([`OneStep`]), a second SIGINT
    /// that exits at once ([`SecondSignalExits`]).
    fn default() -> Self {
        Parts {
            naming: Arc::new(RandomIds),
            progress: Arc::new(ProgressJson),
            launcher: Arc::new(Reexec),
            checkpoints: Arc::new(OneStep),
            cancel: Arc::new(SecondSignalExits),
        }
    }
}

impl Parts {
    /// The job store under `state_dir`, naming, publishing and checkpointing with these parts.
    pub fn job_store(&self, state_dir: impl Into<PathBuf>) -> JobStore {
        JobStore::new(state_dir)
            .named_by(Arc::clone(&self.naming))
            .publishing_to(Arc::clone(&self.progress))
            .committing_with(Arc::clone(&self.checkpoints))
    }
}
