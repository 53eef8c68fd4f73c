//! The identity of an invocation: what makes two calls "the identical invocation".
//!
//! Jobs and checkpoints are keyed by the command path, the normalized arguments, the working
//! directory, the tool version, a digest of stdin, the idempotency key and the instance
//! (REQ-F-081, REQ-C-035, docs/contract.md §9). [`InvocationIdentity::key`] is a stable sha256 over a
//! length-prefixed encoding of all of them, so no two different field sets can produce the same
//! byte stream. The instance is part of the key: an invocation under another instance never
//! attaches to, or resumes, this instance's work.
//!
//! **Normalization.** [`normalize_args`] removes the flags that never change the work:
//! `--budget`, `--timeout`, `--output` (both `--flag value` and `--flag=value`), and the flags
//! whose values have their own field (`--instance-id`, `--idempotency-key`). Everything after a
//! `--` is kept as is.
//!
//! **Writers without a key.** A paused writer's `continue_command` must carry
//! `--idempotency-key`; when the caller gave none, the framework appends
//! [`InvocationIdentity::derived_idempotency_key`], a key computed from the identity itself.
//! The framework should key the job and the checkpoint of a writer with the effective key
//! (given, or derived when none was given: [`InvocationIdentity::with_effective_key`]). Then the
//! first call, its continuation (which carries the derived key explicitly) and a plain repeat
//! after a `kill -9` all have one identity, and no key needs to be stored anywhere.
//!
//! **Checkpoints** use the same key as jobs (including the idempotency key, as the spec asks).
//!
//! **Naming.** A [`JobNaming`] keys an identity and names a new job; the job store asks its
//! own. reftool's is [`RandomIds`]: [`InvocationIdentity::key`], and ids of 128 random bits.

use std::ffi::{OsStr, OsString};
use std::io::{self, Read};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use super::ids::{JobId, JobIdError};

/// Flags that never change the work, removed by [`normalize_args`] with their values.
pub const VOLATILE_FLAGS: &[&str] =
    &["--budget", "--timeout", "--output", "--instance-id", "--idempotency-key"];

/// Everything that identifies an invocation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvocationIdentity {
    /// Dot-separated command path, e.g. `analyze`, `job.wait`.
    pub command_path: String,
    /// Arguments after normalization ([`normalize_args`]).
    pub args: Vec<OsString>,
    /// The working directory of the call.
    pub cwd: PathBuf,
    /// The tool's version.
    pub tool_version: String,
    /// sha256 hex of the spooled stdin, `None` when the command reads no stdin.
    pub stdin_digest: Option<String>,
    /// The idempotency key (given, or derived for a writer).
    pub idempotency_key: Option<String>,
    /// The instance the call runs under.
    pub instance: String,
}

/// A stable identity key: 64 lowercase hex digits.
#[derive(Debug, Clone, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub struct IdentityKey(pub String);

impl IdentityKey {
    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for IdentityKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// Removes [`VOLATILE_FLAGS`] (and their values) from an argument list; see the module docs.
pub fn normalize_args(args: &[OsString]) -> Vec<OsString> {
    normalize_args_without(args, VOLATILE_FLAGS)
}

/// [`normalize_args`] with a custom list of flags to drop.
pub fn normalize_args_without(args: &[OsString], drop: &[&str]) -> Vec<OsString> {
    let mut out = Vec::with_capacity(args.len());
    let mut iter = args.iter();
    while let Some(arg) = iter.next() {
        let bytes = arg.as_bytes();
        if bytes == b"--" {
            out.push(arg.clone());
            out.extend(iter.by_ref().cloned());
            break;
        }
        let dropped = drop.iter().any(|flag| {
            let f = flag.as_bytes();
            if bytes == f {
                // `--flag value`: the value goes too.
                iter.next();
                true
            } else {
                bytes.len() > f.len() && bytes.starts_with(f) && bytes[f.len()] == b'='
            }
        });
        if !dropped {
            out.push(arg.clone());
        }
    }
    out
}

fn feed(hasher: &mut Sha256, tag: &str, bytes: &[u8]) {
    hasher.update(tag.as_bytes());
    hasher.update((bytes.len() as u64).to_le_bytes());
    hasher.update(bytes);
}

fn feed_opt(hasher: &mut Sha256, tag: &str, value: Option<&str>) {
    match value {
        Some(v) => feed(hasher, tag, v.as_bytes()),
        None => hasher.update(format!("{tag}-none").as_bytes()),
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

impl InvocationIdentity {
    fn hasher(&self, domain: &str, with_key: bool) -> Sha256 {
        let mut h = Sha256::new();
        feed(&mut h, "domain", domain.as_bytes());
        feed(&mut h, "command", self.command_path.as_bytes());
        h.update((self.args.len() as u64).to_le_bytes());
        for a in &self.args {
            feed(&mut h, "arg", a.as_bytes());
        }
        feed(&mut h, "cwd", self.cwd.as_os_str().as_bytes());
        feed(&mut h, "version", self.tool_version.as_bytes());
        feed_opt(&mut h, "stdin", self.stdin_digest.as_deref());
        if with_key {
            feed_opt(&mut h, "key", self.idempotency_key.as_deref());
        }
        feed(&mut h, "instance", self.instance.as_bytes());
        h
    }

    /// The stable key of this invocation (jobs and checkpoints).
    pub fn key(&self) -> IdentityKey {
        IdentityKey(hex(&self.hasher("reftool-invocation-v1", true).finalize()))
    }

    /// An idempotency key derived from every field except the key itself: `ik-` + 32 hex.
    pub fn derived_idempotency_key(&self) -> String {
        let digest = self.hasher("reftool-derived-idempotency-key-v1", false).finalize();
        format!("ik-{}", hex(&digest[..16]))
    }

    /// This identity with the caller's key, or the derived key when the caller gave none.
    pub fn with_effective_key(mut self) -> Self {
        if self.idempotency_key.is_none() {
            self.idempotency_key = Some(self.derived_idempotency_key());
        }
        self
    }
}

/// How jobs are keyed and named: the key that makes two invocations the identical one (a job
/// and a checkpoint are found by it) and the id of a new job. The job store keeps one
/// ([`super::jobs::JobStore::named_by`]).
pub trait JobNaming: Send + Sync {
    /// The key of `identity`.
    fn key(&self, identity: &InvocationIdentity) -> IdentityKey;
    /// The id of a new job.
    fn new_id(&self) -> Result<JobId, JobIdError>;
}

impl std::fmt::Debug for dyn JobNaming {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("JobNaming")
    }
}

/// reftool's naming: every field of the identity keys the job ([`InvocationIdentity::key`]),
/// and each new job gets 128 random bits ([`JobId::generate`]), so one id tells nothing of
/// the next.
#[derive(Debug, Clone, Copy, Default)]
pub struct RandomIds;

impl JobNaming for RandomIds {
    fn key(&self, identity: &InvocationIdentity) -> IdentityKey {
        identity.key()
    }

    fn new_id(&self) -> Result<JobId, JobIdError> {
        JobId::generate()
    }
}

/// sha256 hex of everything `reader` yields.
pub fn digest_reader(mut reader: impl Read) -> io::Result<String> {
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        let n = reader.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(hex(&h.finalize()))
}

/// sha256 hex of a file (the stdin spool).
pub fn digest_file(path: &Path) -> io::Result<String> {
    digest_reader(std::fs::File::open(path)?)
}

/// Whether an argv already carries `--idempotency-key` (before any `--`).
pub fn has_idempotency_flag(argv: &[OsString]) -> bool {
    has_flag(argv, "--idempotency-key")
}

/// Whether an argv carries the long flag `flag` (`--flag value` or `--flag=value`, before any
/// `--`).
pub fn has_flag(argv: &[OsString], flag: &str) -> bool {
    let with_value = format!("{flag}=");
    argv.iter()
        .map(|a| a.as_os_str())
        .take_while(|a| *a != OsStr::new("--"))
        .any(|a| a == flag || a.as_bytes().starts_with(with_value.as_bytes()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    fn ident(args: &[&str]) -> InvocationIdentity {
        InvocationIdentity {
            command_path: "analyze".into(),
            args: normalize_args(&os(args)),
            cwd: "/tmp/w".into(),
            tool_version: "0.1.0".into(),
            stdin_digest: None,
            idempotency_key: None,
            instance: "default".into(),
        }
    }

    #[test]
    fn volatile_flags_are_dropped_with_values() {
        let n = normalize_args(&os(&[
            "analyze",
            "--budget",
            "5s",
            "big.csv",
            "--timeout=1m",
            "--output",
            "json",
            "--instance-id=x",
            "--idempotency-key",
            "k",
            "--budgetary",
            "--",
            "--budget",
            "1",
        ]));
        assert_eq!(n, os(&["analyze", "big.csv", "--budgetary", "--", "--budget", "1"]));
    }

    #[test]
    fn budget_and_timeout_do_not_change_the_key() {
        assert_eq!(
            ident(&["a.csv"]).key(),
            ident(&["--budget", "1s", "a.csv", "--timeout", "9s"]).key()
        );
        assert_ne!(ident(&["a.csv"]).key(), ident(&["b.csv"]).key());
    }

    #[test]
    fn every_field_counts() {
        let base = ident(&["a.csv"]);
        let mut variants = vec![];
        let mut v = base.clone();
        v.command_path = "digest".into();
        variants.push(v);
        let mut v = base.clone();
        v.cwd = "/tmp/other".into();
        variants.push(v);
        let mut v = base.clone();
        v.tool_version = "0.2.0".into();
        variants.push(v);
        let mut v = base.clone();
        v.stdin_digest = Some("00".into());
        variants.push(v);
        let mut v = base.clone();
        v.idempotency_key = Some("k".into());
        variants.push(v);
        let mut v = base.clone();
        v.instance = "other".into();
        variants.push(v);
        // Argument boundaries matter: ["ab"] differs from ["a", "b"].
        let mut v = base.clone();
        v.args = os(&["a.c", "sv"]);
        variants.push(v);
        for v in variants {
            assert_ne!(v.key(), base.key(), "{v:?}");
        }
        assert_eq!(base.key().as_str().len(), 64);
    }

    #[test]
    fn derived_key_makes_the_continuation_identical() {
        let first = ident(&["rows.csv", "--db", "x.db"]).with_effective_key();
        let key = first.idempotency_key.clone().unwrap();
        assert!(key.starts_with("ik-"));
        let continuation = ident(&["rows.csv", "--db", "x.db", "--idempotency-key", &key]);
        let continuation =
            InvocationIdentity { idempotency_key: Some(key.clone()), ..continuation };
        assert_eq!(first.key(), continuation.with_effective_key().key());
        // A repeat without the key derives the same one.
        assert_eq!(ident(&["rows.csv", "--db", "x.db"]).derived_idempotency_key(), key);
        // Another instance derives another key.
        let mut other = ident(&["rows.csv", "--db", "x.db"]);
        other.instance = "b".into();
        assert_ne!(other.derived_idempotency_key(), key);
    }

    #[test]
    fn digests_and_key_flag_detection() {
        assert_eq!(
            digest_reader(&b"abc"[..]).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(has_idempotency_flag(&os(&["x", "--idempotency-key=k"])));
        assert!(has_idempotency_flag(&os(&["x", "--idempotency-key", "k"])));
        assert!(!has_idempotency_flag(&os(&["x", "--", "--idempotency-key", "k"])));
    }
}
