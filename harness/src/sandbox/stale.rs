//! Sandboxes of conform processes that are gone.
//!
//! A conform killed with SIGKILL cannot clean up: its sandbox directories stay. Each sandbox
//! therefore holds an owner file ([`OWNER_FILE`]) naming the conform process that made it: its
//! pid, its start time (so that a reused pid is not taken for the owner), the boot and the pid
//! namespace (so that a pid is only compared where it means something) and the sandbox's
//! marker. The first sandbox a conform makes in a directory first removes, from that
//! directory, every sandbox whose owner is gone, after killing the processes still carrying
//! its marker. A sandbox without a readable owner file (being made right now, kept with
//! `--keep-sandboxes`, or made by an older conform) and a sandbox of a live conform are never
//! touched.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read, Write};
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::{procfs, sweep};

/// The owner file in every sandbox's root.
pub const OWNER_FILE: &str = "conform-owner";

/// The first line of an owner file.
const OWNER_HEADER: &str = "conform sandbox owner v1";

/// Owner files are tiny; a bigger one is not ours.
const OWNER_LIMIT: u64 = 4096;

/// A sandbox of a conform process that is gone, removed by [`remove_stale_sandboxes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StaleSandbox {
    /// The directory (now gone).
    pub path: PathBuf,
    /// The pid of the conform that made it.
    pub owner_pid: u32,
    /// How many processes still carried its marker (now killed).
    pub killed: usize,
}

/// Who made a sandbox.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Owner {
    pid: u32,
    start_ticks: u64,
    boot_id: String,
    pid_namespace: String,
    marker: String,
}

impl Owner {
    fn me(marker: &str) -> Owner {
        let me = procfs::me();
        Owner {
            pid: me.pid,
            start_ticks: me.start_ticks,
            boot_id: procfs::boot_id().unwrap_or_default(),
            pid_namespace: procfs::pid_namespace().unwrap_or_default(),
            marker: marker.to_owned(),
        }
    }

    fn render(&self) -> String {
        format!(
            "{OWNER_HEADER}\npid {}\nstart {}\nboot {}\npidns {}\nmarker {}\n",
            self.pid, self.start_ticks, self.boot_id, self.pid_namespace, self.marker
        )
    }

    fn parse(text: &str) -> Option<Owner> {
        let mut lines = text.lines();
        if lines.next()? != OWNER_HEADER {
            return None;
        }
        let mut field = |key: &str| -> Option<String> {
            let (k, v) = lines.next()?.split_once(' ')?;
            (k == key).then(|| v.to_owned())
        };
        Some(Owner {
            pid: field("pid")?.parse().ok()?,
            start_ticks: field("start")?.parse().ok()?,
            boot_id: field("boot")?,
            pid_namespace: field("pidns")?,
            marker: field("marker")?,
        })
    }

    /// Whether the owner is certainly gone. When conform cannot tell (another pid namespace,
    /// an unreadable boot id), it is not gone.
    fn is_gone(&self) -> bool {
        let Some(boot) = procfs::boot_id() else { return false };
        if self.boot_id != boot {
            // Made before the last reboot: nothing of that boot runs.
            return true;
        }
        if procfs::pid_namespace().is_none_or(|ns| ns != self.pid_namespace) {
            return false;
        }
        procfs::stat(self.pid).is_none_or(|s| s.start_ticks != self.start_ticks)
    }
}

/// Writes the owner file of a fresh sandbox (a new file: an existing one is an error).
pub(super) fn write_owner(root: &Path, marker: &str) -> io::Result<()> {
    let mut file =
        fs::OpenOptions::new().write(true).create_new(true).open(root.join(OWNER_FILE))?;
    file.write_all(Owner::me(marker).render().as_bytes())
}

/// Removes the owner file: the sandbox is kept and must never be taken for a stale one.
pub(super) fn forget_owner(root: &Path) {
    let _ = fs::remove_file(root.join(OWNER_FILE));
}

fn read_owner(sandbox: &Path) -> Option<Owner> {
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(sandbox.join(OWNER_FILE))
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > OWNER_LIMIT {
        return None;
    }
    let mut text = String::new();
    file.take(OWNER_LIMIT).read_to_string(&mut text).ok()?;
    Owner::parse(&text)
}

/// Removes, from `parent`, every sandbox (a `conform-*` directory of conform's user with an
/// owner file) whose owner is gone, after SIGKILLing the processes still carrying its marker.
/// Returns what it removed.
pub fn remove_stale_sandboxes(parent: &Path) -> Vec<StaleSandbox> {
    let Ok(entries) = fs::read_dir(parent) else {
        return Vec::new();
    };
    let uid = nix::unistd::geteuid().as_raw();
    let mut removed = Vec::new();
    for entry in entries.flatten() {
        if !entry.file_name().to_str().is_some_and(|n| n.starts_with("conform-")) {
            continue;
        }
        let path = entry.path();
        // Never through a symbolic link, never another user's.
        let Ok(meta) = fs::symlink_metadata(&path) else { continue };
        if !meta.is_dir() || meta.uid() != uid {
            continue;
        }
        let Some(owner) = read_owner(&path) else { continue };
        if !owner.is_gone() {
            continue;
        }
        let killed = sweep::kill_marked(&owner.marker).len();
        if super::remove::remove_tree(&path).is_ok() {
            removed.push(StaleSandbox { path, owner_pid: owner.pid, killed });
        }
    }
    removed
}

/// [`remove_stale_sandboxes`] once per directory per process, each removal said on stderr.
pub(super) fn remove_stale_once(parent: &Path) {
    static SEEN: OnceLock<Mutex<BTreeSet<PathBuf>>> = OnceLock::new();
    let seen = SEEN.get_or_init(|| Mutex::new(BTreeSet::new()));
    if !seen.lock().unwrap_or_else(PoisonError::into_inner).insert(parent.to_path_buf()) {
        return;
    }
    for stale in remove_stale_sandboxes(parent) {
        eprintln!("conform: {}", describe(&stale));
    }
}

/// The line that says a stale sandbox was removed.
pub fn describe(stale: &StaleSandbox) -> String {
    let killed = match stale.killed {
        0 => String::new(),
        n => format!(", and killed {n} process(es) of it still running"),
    };
    // The directory's name is conform's prefix and whatever follows: shown inert.
    format!(
        "removed the sandbox {} of conform process {}, which is gone{killed}",
        crate::inert::line(&stale.path.display().to_string()),
        stale.owner_pid
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_file_reads_back() {
        let owner = Owner::me("00ff");
        assert_eq!(Owner::parse(&owner.render()), Some(owner.clone()));
        assert!(!owner.is_gone(), "this process is alive");
        assert_eq!(Owner::parse("something else\npid 1\n"), None);
        assert_eq!(Owner::parse(&owner.render().replace("pid ", "pdi ")), None);
    }

    #[test]
    fn a_reused_pid_or_another_boot_is_gone() {
        let me = Owner::me("00ff");
        let reused = Owner { start_ticks: me.start_ticks + 1, ..me.clone() };
        assert!(reused.is_gone());
        let earlier_boot = Owner { boot_id: "another-boot".into(), ..me.clone() };
        assert!(earlier_boot.is_gone());
        let elsewhere = Owner { pid_namespace: "pid:[1]".into(), start_ticks: 0, ..me };
        assert!(!elsewhere.is_gone(), "another namespace's pid cannot be judged");
    }
}
