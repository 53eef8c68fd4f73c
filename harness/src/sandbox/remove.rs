//! Removing a sandbox whatever the tool left in it.
//!
//! `remove_dir_all` gives up on what a tool may well leave: a directory without write
//! permission (Go's module cache is read-only, 0555, and so is anything `chmod -R a-w` made),
//! a file or directory made immutable or append-only (`chattr +i`), a file system mounted
//! inside the sandbox; and it descends into a mount, so a tool that bind-mounted a directory
//! of the machine into its sandbox would have had that directory emptied. [`remove_tree`]:
//!
//! 1. unmounts every mount below the sandbox (deepest first, detached: a busy one goes as
//!    well), as listed in `/proc/self/mountinfo`: a sandbox is made empty, so whatever is
//!    mounted in it, the run mounted;
//! 2. walks the tree by file descriptors (`openat` with `O_NOFOLLOW`), so it never follows a
//!    symbolic link nor leaves the sandbox, and never descends into a directory that is still
//!    the root of a mount (it is left, and named);
//! 3. gives a directory it must empty the owner's write and search permission, and clears the
//!    immutable and append-only flags of what refuses to go (which needs the capability
//!    `CAP_LINUX_IMMUTABLE`, as setting them did);
//! 4. removes the owner file last, then the directory: a removal that fails part way leaves a
//!    sandbox that the next run still recognises as stale, and removes.
//!
//! It holds one descriptor per level of the tree. When descriptors run out (`EMFILE` under a
//! low `ulimit -n` with many scenarios at once) the failure is [`Left::transient`]: the
//! sandbox is tried again once the run is over.

use std::ffi::{CStr, OsStr};
use std::fmt;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use rustix::fs::{AtFlags, CWD, Dir, FileType, IFlags, Mode, OFlags, StatxAttributes, StatxFlags};
use rustix::io::Errno;

use super::stale::OWNER_FILE;

/// How many levels of the tree the walk descends holding a descriptor each; a directory
/// deeper down is first moved up to the sandbox's root (renamed, within the sandbox) and
/// removed from there, so that neither descriptors nor the stack grow with the tree's depth.
const MAX_DEPTH: usize = 32;

/// What could not be removed, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// The first path that stayed.
    pub path: PathBuf,
    /// Why, as the system said or as conform saw it.
    pub reason: String,
    /// Whether the cause was conform's own resources (descriptors, memory), so that a later
    /// try may succeed.
    pub transient: bool,
}

impl fmt::Display for Left {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.path.display(), self.reason)
    }
}

/// Whether an error is a shortage of conform's own, not something the tool did.
fn is_shortage(e: &io::Error) -> bool {
    matches!(e.raw_os_error(), Some(libc::EMFILE | libc::ENFILE | libc::ENOMEM))
}

/// The walk's state: the first failure, the effective user, the directories moved up to the
/// sandbox's root to be removed from there.
struct Walk {
    left: Option<Left>,
    root_user: bool,
    uid: u32,
    root: Option<OwnedFd>,
    moved_up: Vec<std::ffi::CString>,
    moves: u64,
}

impl Walk {
    fn fail(&mut self, path: &Path, reason: impl Into<String>, transient: bool) {
        if self.left.is_none() {
            self.left = Some(Left { path: path.to_owned(), reason: reason.into(), transient });
        }
    }

    fn fail_io(&mut self, path: &Path, what: &str, e: Errno) {
        let transient = matches!(e, Errno::MFILE | Errno::NFILE | Errno::NOMEM);
        self.fail(path, format!("failed to {what}: {}", io::Error::from(e)), transient);
    }
}

/// Removes the directory `root` and everything in it (see the module docs). `Err` names the
/// first thing that stayed; the rest was removed as far as it could be.
pub fn remove_tree(root: &Path) -> Result<(), Left> {
    let uid = rustix::process::geteuid().as_raw();
    let mut walk =
        Walk { left: None, root_user: uid == 0, uid, root: None, moved_up: Vec::new(), moves: 0 };
    let canonical = root.canonicalize().unwrap_or_else(|_| root.to_path_buf());
    unmount_below(&canonical, &mut walk);
    match rustix::fs::openat(CWD, root, dir_flags(), Mode::empty()) {
        Ok(fd) => {
            walk.root = rustix::io::dup(&fd).ok();
            empty_dir(fd.as_fd(), root, 0, &mut walk);
            let dev = rustix::fs::fstat(&fd).map(|s| s.st_dev).unwrap_or(0);
            while let Some(name) = walk.moved_up.pop() {
                let path = root.join(OsStr::from_bytes(name.to_bytes()));
                remove_entry(fd.as_fd(), &name, &path, dev, 0, &mut walk);
            }
            walk.root = None;
            drop(fd);
        }
        Err(Errno::NOENT) => return Ok(()),
        Err(e) => walk.fail_io(root, "open the sandbox", e),
    }
    if walk.left.is_none() {
        if let Err(e) = std::fs::remove_file(root.join(OWNER_FILE)) {
            if e.kind() != io::ErrorKind::NotFound {
                let transient = is_shortage(&e);
                walk.fail(&root.join(OWNER_FILE), format!("failed to remove it: {e}"), transient);
            }
        }
    }
    if walk.left.is_none() {
        if let Err(e) = std::fs::remove_dir(root) {
            let transient = is_shortage(&e);
            walk.fail(root, format!("failed to remove it: {e}"), transient);
        }
    }
    walk.left.map_or(Ok(()), Err)
}

fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC
}

/// Unmounts (detached) every mount point at or below `root`, deepest first.
fn unmount_below(root: &Path, walk: &mut Walk) {
    let Ok(mountinfo) = std::fs::read_to_string("/proc/self/mountinfo") else { return };
    let mut points: Vec<PathBuf> = mountinfo
        .lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|field| PathBuf::from(super::cgroup::unescape(field)))
        .filter(|point| point.starts_with(root))
        .collect();
    points.sort_by_key(|p| std::cmp::Reverse(p.components().count()));
    points.dedup();
    for point in points {
        // Stacked mounts on one point come off one at a time.
        for _ in 0..16 {
            match rustix::mount::unmount(&point, rustix::mount::UnmountFlags::DETACH) {
                Ok(()) => continue,
                Err(Errno::INVAL | Errno::NOENT) => break,
                Err(e) => {
                    walk.fail_io(&point, "unmount what the tool mounted there", e);
                    break;
                }
            }
        }
    }
}

/// Whether `name` in `dir` is the root of a mount (a directory the walk must not enter).
fn is_mount_root(dir: BorrowedFd<'_>, name: &CStr, parent_dev: u64) -> bool {
    let flags = AtFlags::SYMLINK_NOFOLLOW | AtFlags::STATX_DONT_SYNC;
    match rustix::fs::statx(dir, name, flags, StatxFlags::BASIC_STATS) {
        Ok(x) if x.stx_attributes_mask.contains(StatxAttributes::MOUNT_ROOT) => {
            x.stx_attributes.contains(StatxAttributes::MOUNT_ROOT)
        }
        // An older kernel: a mount of another file system, at least, is seen by its device.
        Ok(x) => rustix::fs::makedev(x.stx_dev_major, x.stx_dev_minor) != parent_dev,
        Err(_) => false,
    }
}

/// Clears the immutable and append-only flags of an open file or directory; returns whether
/// there were any to clear (and they are gone).
fn clear_flags(fd: BorrowedFd<'_>) -> bool {
    let Ok(flags) = rustix::fs::ioctl_getflags(fd) else { return false };
    let sticky = IFlags::IMMUTABLE | IFlags::APPEND;
    if !flags.intersects(sticky) {
        return false;
    }
    rustix::fs::ioctl_setflags(fd, flags - sticky).is_ok()
}

/// Makes an open directory one whose entries its owner may remove: owner write and search
/// permission, no immutable or append-only flag.
fn open_up(dir: BorrowedFd<'_>, walk: &Walk) {
    if let Ok(stat) = rustix::fs::fstat(dir) {
        let mode = stat.st_mode & 0o7777;
        if !walk.root_user && stat.st_uid == walk.uid && mode & 0o300 != 0o300 {
            let _ = rustix::fs::fchmod(dir, Mode::from_raw_mode(mode | 0o700));
        }
    }
    clear_flags(dir);
}

/// Opens the directory `name` in `dir`; one without read or search permission for its owner
/// (0000) is given them first, through a path descriptor, never through its name again.
fn open_child_dir(dir: BorrowedFd<'_>, name: &CStr, walk: &Walk) -> rustix::io::Result<OwnedFd> {
    match rustix::fs::openat(dir, name, dir_flags(), Mode::empty()) {
        Err(Errno::ACCESS) if !walk.root_user => {
            let flags = OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC;
            let path_fd = rustix::fs::openat(dir, name, flags, Mode::empty())?;
            let stat = rustix::fs::fstat(&path_fd)?;
            // `/proc/self/fd/N` is the very directory opened, whatever its name is now.
            let fd_path = format!("/proc/self/fd/{}", std::os::fd::AsRawFd::as_raw_fd(&path_fd));
            rustix::fs::chmod(
                fd_path.as_str(),
                Mode::from_raw_mode((stat.st_mode & 0o7777) | 0o700),
            )?;
            rustix::fs::openat(dir, name, dir_flags(), Mode::empty())
        }
        other => other,
    }
}

/// Removes everything in the open directory `dir` (at `path`), the owner file of the sandbox's
/// root aside.
fn empty_dir(dir: BorrowedFd<'_>, path: &Path, depth: usize, walk: &mut Walk) {
    open_up(dir, walk);
    let dev = rustix::fs::fstat(dir).map(|s| s.st_dev).unwrap_or(0);
    let names: Vec<std::ffi::CString> = match Dir::read_from(dir) {
        Ok(mut entries) => {
            let mut names = Vec::new();
            while let Some(entry) = entries.read() {
                match entry {
                    Ok(entry) => {
                        let name = entry.file_name();
                        if name.to_bytes() != b"." && name.to_bytes() != b".." {
                            names.push(name.to_owned());
                        }
                    }
                    Err(e) => {
                        walk.fail_io(path, "list it", e);
                        break;
                    }
                }
            }
            names
        }
        Err(e) => {
            walk.fail_io(path, "list it", e);
            return;
        }
    };
    for name in names {
        if depth == 0 && name.to_bytes() == OWNER_FILE.as_bytes() {
            continue;
        }
        let child = path.join(OsStr::from_bytes(name.to_bytes()));
        remove_entry(dir, &name, &child, dev, depth, walk);
    }
}

/// Removes one entry of `dir`: a directory after emptying it, anything else by unlinking it.
fn remove_entry(
    dir: BorrowedFd<'_>,
    name: &CStr,
    path: &Path,
    parent_dev: u64,
    depth: usize,
    walk: &mut Walk,
) {
    let stat = match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
        Ok(stat) => stat,
        Err(Errno::NOENT) => return,
        Err(e) => return walk.fail_io(path, "look at it", e),
    };
    if FileType::from_raw_mode(stat.st_mode) == FileType::Directory {
        if is_mount_root(dir, name, parent_dev) {
            return walk.fail(path, "a file system is still mounted there", false);
        }
        if depth >= MAX_DEPTH && move_up(dir, name, walk) {
            return;
        }
        match open_child_dir(dir, name, walk) {
            Ok(child) => empty_dir(child.as_fd(), path, depth + 1, walk),
            Err(e) => return walk.fail_io(path, "open it", e),
        }
        match rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
            Ok(()) | Err(Errno::NOENT) => {}
            Err(Errno::PERM) if unstick(dir, name, true) => {
                if let Err(e) = rustix::fs::unlinkat(dir, name, AtFlags::REMOVEDIR) {
                    walk.fail_io(path, "remove it", e);
                }
            }
            Err(e) => walk.fail_io(path, "remove it", e),
        }
        return;
    }
    let regular = FileType::from_raw_mode(stat.st_mode) == FileType::RegularFile;
    match rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
        Ok(()) | Err(Errno::NOENT) => {}
        Err(Errno::PERM) if regular && unstick(dir, name, false) => {
            if let Err(e) = rustix::fs::unlinkat(dir, name, AtFlags::empty()) {
                walk.fail_io(path, "remove it", e);
            }
        }
        Err(e) => walk.fail_io(path, "remove it", e),
    }
}

/// Renames the directory `name` of `dir` to a fresh name in the sandbox's root, to be removed
/// from there ([`MAX_DEPTH`]); returns whether it did (if not, the walk goes on down).
fn move_up(dir: BorrowedFd<'_>, name: &CStr, walk: &mut Walk) -> bool {
    let Some(root) = walk.root.as_ref() else { return false };
    // A name nothing holds yet: never replace what is there.
    for _ in 0..8 {
        walk.moves += 1;
        let Ok(fresh) = std::ffi::CString::new(format!(".conform-deep-{}", walk.moves)) else {
            return false;
        };
        let flags = rustix::fs::RenameFlags::NOREPLACE;
        match rustix::fs::renameat_with(dir, name, root, fresh.as_c_str(), flags) {
            Ok(()) => {
                walk.moved_up.push(fresh);
                return true;
            }
            Err(Errno::EXIST) => {}
            Err(_) => return false,
        }
    }
    false
}

/// Clears the immutable and append-only flags of the regular file or directory `name` in
/// `dir` (opened without following a link, and without blocking); returns whether it did.
fn unstick(dir: BorrowedFd<'_>, name: &CStr, directory: bool) -> bool {
    let mut flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC | OFlags::NONBLOCK;
    if directory {
        flags |= OFlags::DIRECTORY;
    }
    match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => {
            let regular_or_dir = rustix::fs::fstat(&fd).is_ok_and(|s| {
                matches!(
                    FileType::from_raw_mode(s.st_mode),
                    FileType::RegularFile | FileType::Directory
                )
            });
            regular_or_dir && clear_flags(fd.as_fd())
        }
        Err(_) => false,
    }
}

/// Sandboxes whose removal ran out of conform's own resources, for [`retry_pending`].
fn pending() -> std::sync::MutexGuard<'static, Vec<PathBuf>> {
    static PENDING: std::sync::OnceLock<std::sync::Mutex<Vec<PathBuf>>> =
        std::sync::OnceLock::new();
    PENDING
        .get_or_init(|| std::sync::Mutex::new(Vec::new()))
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Removes a sandbox; a removal that ran out of descriptors or memory is kept for
/// [`retry_pending`] and is no error here. `Err` is what the tool left that conform could not
/// remove (its owner file stays, so the next run removes it as stale).
pub(super) fn remove_sandbox(root: &Path) -> Result<(), Left> {
    match remove_tree(root) {
        Err(left) if left.transient => {
            pending().push(root.to_path_buf());
            Ok(())
        }
        other => other,
    }
}

/// Tries again every removal that ran short of conform's own resources; returns what still
/// stays.
pub(super) fn retry_pending() -> Vec<Left> {
    let roots = std::mem::take(&mut *pending());
    roots.iter().filter_map(|root| remove_tree(root).err()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_read_only_tree_and_a_link_out_are_removed_without_following_the_link() {
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("keep"), "x").unwrap();
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("conform-test");
        let deep = root.join("home/go/pkg/mod/m@v1/sub");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("f.go"), "package f").unwrap();
        std::fs::write(root.join(OWNER_FILE), "owner").unwrap();
        std::os::unix::fs::symlink(outside.path(), root.join("home/out")).unwrap();
        for dir in [deep.clone(), deep.parent().unwrap().to_path_buf(), root.join("home/go")] {
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).unwrap();
        }
        std::fs::set_permissions(deep.join("f.go"), std::fs::Permissions::from_mode(0o444))
            .unwrap();
        assert_eq!(remove_tree(&root), Ok(()));
        assert!(!root.exists());
        assert!(outside.path().join("keep").exists(), "the link was followed");
        assert_eq!(remove_tree(&root), Ok(()), "a second removal finds nothing to do");
    }

    #[test]
    fn a_tree_far_deeper_than_the_walk_descends_is_removed() {
        let parent = tempfile::tempdir().unwrap();
        let root = parent.path().join("conform-deep");
        let mut deep = root.clone();
        for i in 0..(3 * MAX_DEPTH + 5) {
            deep.push(format!("d{i}"));
        }
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("leaf"), "x").unwrap();
        std::fs::create_dir(root.join(".conform-deep-1")).unwrap();
        assert_eq!(remove_tree(&root), Ok(()));
        assert!(!root.exists());
    }
}
