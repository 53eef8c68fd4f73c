//! Leftovers of killed processes: temp files of atomic checkpoint writes whose writer died
//! between write and rename, and ended jobs past their retention. A job's new owner removes
//! the temps beside its own checkpoint at once; every `job` command sweeps the rest once
//! they are old enough that no live write can own them.

use std::time::Duration;

use rusqlite::Connection;

use crate::runtime::jobs::{self, JobStore, JobView};

/// Removes the temporary files a killed owner left beside this invocation's file checkpoint
/// (an atomic write is a temp file renamed into place; `kill -9` between the two leaves the
/// temp). The caller now owns the job, so no other process writes this checkpoint.
pub(super) fn sweep_stale_checkpoint_temps(store: &JobStore, view: &JobView) {
    let path = store.checkpoint_path(&view.record.instance, &view.record.identity);
    let (Some(dir), Some(name)) = (path.parent(), path.file_name()) else { return };
    let prefix = format!(".{}.tmp-", name.to_string_lossy());
    let Ok(entries) = std::fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        if entry.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// How old a temp file beside a checkpoint must be before any `job` command removes it (a
/// live atomic write lasts milliseconds).
const STALE_TEMP_AGE: Duration = Duration::from_secs(600);

/// What every `job` command removes first: ended jobs past their retention (with stale
/// stdin spools) and old temp files of checkpoint writes.
pub(super) fn sweep_ended(store: &JobStore, conn: &Connection) {
    let _ = store.cleanup_expired(conn, jobs::RETENTION_MS);
    sweep_old_checkpoint_temps(store);
}

/// The `job` commands' sweep (beside the runtime's retention): temp files of atomic
/// checkpoint writes whose writer was killed and whose invocation was never repeated.
fn sweep_old_checkpoint_temps(store: &JobStore) {
    let Ok(instances) = std::fs::read_dir(store.state_dir().join("checkpoints")) else { return };
    for instance in instances.flatten() {
        let Ok(entries) = std::fs::read_dir(instance.path()) else { continue };
        for entry in entries.flatten() {
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let old = entry
                .metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age >= STALE_TEMP_AGE);
            if name.starts_with('.') && name.contains(".tmp-") && old {
                let _ = std::fs::remove_file(entry.path());
            }
        }
    }
}
