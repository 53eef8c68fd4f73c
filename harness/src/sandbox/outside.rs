//! Writes outside the sandbox: a look at the places a tool may reach without being told, taken
//! before and after each scenario.
//!
//! A tool gets HOME, TMPDIR and the XDG directories inside its sandbox, and its working
//! directory there; one that writes elsewhere anyway (a hard-coded `/tmp/mytool`, `../..`
//! from its working directory, which is conform's own temporary directory, `~/.mytool` from
//! the password database instead of `HOME`, a file beside its own program) writes on the
//! machine, and scenarios running at once share it. conform cannot stop that without
//! privileges it usually lacks (a mount namespace of its own, with its own `/tmp`, needs root
//! or user namespaces, which CI runners often refuse), so it looks: [`Places::look`] lists the
//! entries directly inside each place, with their inode, size, modification time and kind,
//! and [`Look::changes_since`] tells which are new, changed or gone.
//!
//! What it sees: an entry directly inside one of the places, owned by conform's user (the user
//! the tool runs as), that appeared, changed (size, time, inode) or went away between the
//! looks, including a directory whose entries changed (its time). What it cannot see: a
//! change deeper inside a directory that was already there (a file rewritten in place in
//! `/tmp/mytool/`), a place not in the list, a write undone before the second look, and whose
//! write it was: another process of the same user writing there meanwhile shows too, and with
//! several scenarios at once (`-j`) a change shows in each scenario that was running. conform's
//! own sandboxes (`conform-*`), the files it has open (its report files, its stdout and stderr
//! redirected to a file) and its snapshot directory are left out.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock, PoisonError};

/// One watched directory.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    /// The directory, canonical.
    dir: PathBuf,
}

/// The places a tool may write to outside its sandbox (see the module docs).
#[derive(Debug, Clone, Default)]
pub struct Places {
    places: Vec<Place>,
    uid: u32,
}

/// What is known of one entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Seen {
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    dir: bool,
}

/// The entries of every place at one moment.
#[derive(Debug, Clone, Default)]
pub struct Look {
    entries: BTreeMap<PathBuf, Seen>,
}

/// How an entry changed between two looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ChangeKind {
    /// It was not there before.
    New,
    /// Its size, time or inode changed (a directory: its entries changed).
    Changed,
    /// It is gone.
    Removed,
}

/// One entry outside the sandbox that changed.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct OutsideChange {
    /// The entry.
    pub path: PathBuf,
    /// How.
    pub kind: ChangeKind,
    /// Whether it is (or was) a directory.
    pub dir: bool,
}

impl fmt::Display for OutsideChange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = if self.dir { "directory" } else { "file" };
        let how = match self.kind {
            ChangeKind::New => "new",
            ChangeKind::Changed => "changed",
            ChangeKind::Removed => "removed",
        };
        write!(f, "{} ({how} {what})", self.path.display())
    }
}

/// Paths conform itself writes during a run (report files, snapshots): never the tool's.
fn own_outputs() -> std::sync::MutexGuard<'static, BTreeSet<PathBuf>> {
    static OWN: OnceLock<Mutex<BTreeSet<PathBuf>>> = OnceLock::new();
    OWN.get_or_init(|| Mutex::new(BTreeSet::new())).lock().unwrap_or_else(PoisonError::into_inner)
}

/// Tells the look that conform itself writes `path` during the run (a report file, the
/// snapshot directory), so that it is never taken for the tool's write.
pub fn ignore_outside(path: &Path) {
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let mut own = own_outputs();
    if let Some(parent) = absolute.parent().and_then(|p| p.canonicalize().ok()) {
        if let Some(name) = absolute.file_name() {
            own.insert(parent.join(name));
        }
    }
    own.insert(absolute);
}

impl Places {
    /// The places of a run of `tool` (its program; `profile_dir`, the profile's directory):
    /// conform's temporary directory (the sandboxes' parent, `../..` from a step's working
    /// directory), `/tmp`, `/var/tmp`, `/dev/shm`, conform's `HOME` and the home directory of
    /// its user in the password database, each with its `.config`, `.cache`, `.local/share`
    /// and `.local/state`, conform's working directory, the tool's directory and the
    /// profile's. Those that do not exist are left out.
    pub fn for_run(tool: &Path, profile_dir: Option<&Path>) -> Places {
        let uid = nix::unistd::geteuid();
        let mut dirs: Vec<PathBuf> =
            vec![std::env::temp_dir(), "/tmp".into(), "/var/tmp".into(), "/dev/shm".into()];
        let mut homes: Vec<PathBuf> =
            std::env::var_os("HOME").map(PathBuf::from).into_iter().collect();
        if let Ok(Some(user)) = nix::unistd::User::from_uid(uid) {
            homes.push(user.dir);
        }
        for home in homes {
            for sub in ["", ".config", ".cache", ".local/share", ".local/state"] {
                dirs.push(if sub.is_empty() { home.clone() } else { home.join(sub) });
            }
        }
        dirs.extend(std::env::current_dir().ok());
        dirs.extend(tool.parent().map(Path::to_path_buf));
        dirs.extend(profile_dir.map(Path::to_path_buf));
        let mut places: Vec<Place> = Vec::new();
        for dir in dirs {
            let Ok(dir) = dir.canonicalize() else { continue };
            if dir.is_dir() && !places.iter().any(|p| p.dir == dir) {
                places.push(Place { dir });
            }
        }
        Places { places, uid: uid.as_raw() }
    }

    /// The directories watched, for the manual and the tests.
    pub fn dirs(&self) -> Vec<&Path> {
        self.places.iter().map(|p| p.dir.as_path()).collect()
    }

    /// The entries of every place now (never following a link).
    pub fn look(&self) -> Look {
        let mut own = own_outputs().clone();
        // What conform has open is its own: its stdout and stderr redirected to a file, the
        // report files it writes.
        if let Ok(fds) = std::fs::read_dir("/proc/self/fd") {
            own.extend(fds.flatten().filter_map(|fd| std::fs::read_link(fd.path()).ok()));
        }
        // A place inside another is watched itself; its own time changes with every entry.
        own.extend(self.places.iter().map(|p| p.dir.clone()));
        let mut entries = BTreeMap::new();
        for place in &self.places {
            let Ok(listing) = std::fs::read_dir(&place.dir) else { continue };
            for entry in listing.flatten() {
                if entry.file_name().to_string_lossy().starts_with("conform-") {
                    continue;
                }
                let path = entry.path();
                if own.contains(&path) {
                    continue;
                }
                let Ok(meta) = std::fs::symlink_metadata(&path) else { continue };
                if meta.uid() != self.uid {
                    continue;
                }
                let seen = Seen {
                    ino: meta.ino(),
                    size: meta.size(),
                    mtime: (meta.mtime(), meta.mtime_nsec()),
                    dir: meta.is_dir(),
                };
                entries.insert(path, seen);
            }
        }
        Look { entries }
    }
}

impl Look {
    /// What changed since `before`, by path.
    pub fn changes_since(&self, before: &Look) -> Vec<OutsideChange> {
        let mut changes = Vec::new();
        for (path, now) in &self.entries {
            let kind = match before.entries.get(path) {
                None => ChangeKind::New,
                Some(then) if then != now => ChangeKind::Changed,
                Some(_) => continue,
            };
            changes.push(OutsideChange { path: path.clone(), kind, dir: now.dir });
        }
        for (path, then) in &before.entries {
            if !self.entries.contains_key(path) {
                changes.push(OutsideChange {
                    path: path.clone(),
                    kind: ChangeKind::Removed,
                    dir: then.dir,
                });
            }
        }
        changes.sort_by(|a, b| (a.kind, &a.path).cmp(&(b.kind, &b.path)));
        changes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_look_sees_what_appeared_changed_and_went_directly_inside_a_place() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("kept"), "a").unwrap();
        std::fs::write(dir.path().join("grows"), "a").unwrap();
        std::fs::write(dir.path().join("goes"), "a").unwrap();
        std::fs::create_dir(dir.path().join("conform-sbx")).unwrap();
        let place = Place { dir: dir.path().canonicalize().unwrap() };
        let places = Places { places: vec![place.clone()], uid: nix::unistd::geteuid().as_raw() };
        let before = places.look();
        std::fs::write(dir.path().join("grows"), "abc").unwrap();
        std::fs::remove_file(dir.path().join("goes")).unwrap();
        std::fs::create_dir(dir.path().join("new-dir")).unwrap();
        std::fs::write(dir.path().join("conform-sbx/inside"), "x").unwrap();
        let changes = places.look().changes_since(&before);
        let shown: Vec<String> = changes.iter().map(ToString::to_string).collect();
        let at = |name: &str| place.dir.join(name).display().to_string();
        assert_eq!(
            shown,
            [
                format!("{} (new directory)", at("new-dir")),
                format!("{} (changed file)", at("grows")),
                format!("{} (removed file)", at("goes")),
            ]
        );
    }
}
