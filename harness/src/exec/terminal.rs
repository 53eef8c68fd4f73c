//! Pseudo-terminals for [`super::StdinMode::Pty`].
//!
//! The pair is opened with close-on-exec on both sides (`posix_openpt(O_CLOEXEC)`, and the
//! slave through `File::open`, which always sets it), so a step spawned at the same moment on
//! another thread cannot inherit this step's terminal. The slave is never made a controlling
//! terminal (`O_NOCTTY`): the tool sees `isatty(0)`, nothing more.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::OpenOptionsExt;

use nix::fcntl::OFlag;
use nix::pty::{grantpt, posix_openpt, ptsname_r, unlockpt};

/// Both sides of a fresh pseudo-terminal.
pub(super) struct Terminal {
    /// The side conform keeps: reads what the tool writes to its terminal.
    pub(super) master: OwnedFd,
    /// The side the tool gets as stdin.
    pub(super) slave: File,
}

/// Opens a new pseudo-terminal pair.
pub(super) fn open() -> io::Result<Terminal> {
    let master = posix_openpt(OFlag::O_RDWR | OFlag::O_NOCTTY | OFlag::O_CLOEXEC)?;
    grantpt(&master)?;
    unlockpt(&master)?;
    let slave_path = ptsname_r(&master)?;
    let slave =
        OpenOptions::new().read(true).write(true).custom_flags(libc::O_NOCTTY).open(&slave_path)?;
    Ok(Terminal { master: master.into(), slave })
}
