//! Job ids and instance directory names: random, fixed-form, strictly validated.
//!
//! A job id is `job_` followed by 32 lowercase hex digits: 128 bits from the operating
//! system's random source ([`getrandom`]), far above the 64 bits the contract asks for, so ids
//! cannot be guessed or enumerated. [`JobId::parse`] accepts exactly that form and nothing else,
//! so a value such as `../../etc/passwd`, an empty string, a huge string or non-UTF-8 bytes is
//! refused before any path is built from it (ARG_ERROR at the framework's edge).
//!
//! Instance names come from the caller (`--instance-id`) and are used as one directory level;
//! [`instance_dir_name`] maps any name to a safe, collision-free component.

use std::ffi::OsStr;
use std::fmt;

use sha2::{Digest, Sha256};

/// The fixed prefix of every job id.
pub const JOB_ID_PREFIX: &str = "job_";
/// Number of hex digits after the prefix (128 bits).
pub const JOB_ID_HEX_LEN: usize = 32;

/// A validated job id.
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(try_from = "String", into = "String")]
pub struct JobId(String);

/// Why a text is not a job id, or why none could be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JobIdError {
    /// The text does not have the form `job_` + 32 lowercase hex digits.
    #[error("malformed job id {shown:?}; expected job_ followed by 32 lowercase hex digits")]
    Malformed {
        /// The offending text, shortened to 80 characters for display.
        shown: String,
    },
    /// The operating system's random source failed.
    #[error("failed to draw random bits for a job id: {0}")]
    Random(String),
}

impl JobId {
    /// A fresh random id.
    pub fn generate() -> Result<Self, JobIdError> {
        let mut bytes = [0u8; JOB_ID_HEX_LEN / 2];
        getrandom::fill(&mut bytes).map_err(|e| JobIdError::Random(e.to_string()))?;
        let mut text = String::with_capacity(JOB_ID_PREFIX.len() + JOB_ID_HEX_LEN);
        text.push_str(JOB_ID_PREFIX);
        for b in bytes {
            text.push_str(&format!("{b:02x}"));
        }
        Ok(JobId(text))
    }

    /// Validates a text as a job id.
    pub fn parse(text: &str) -> Result<Self, JobIdError> {
        let valid = text.len() == JOB_ID_PREFIX.len() + JOB_ID_HEX_LEN
            && text.starts_with(JOB_ID_PREFIX)
            && text[JOB_ID_PREFIX.len()..].bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if valid {
            Ok(JobId(text.to_owned()))
        } else {
            Err(JobIdError::Malformed { shown: text.chars().take(80).collect() })
        }
    }

    /// Validates a raw command-line value (non-UTF-8 is malformed).
    pub fn parse_os(text: &OsStr) -> Result<Self, JobIdError> {
        match text.to_str() {
            Some(t) => Self::parse(t),
            None => Err(JobIdError::Malformed {
                shown: text.to_string_lossy().chars().take(80).collect(),
            }),
        }
    }

    /// The id as text (also its directory name).
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for JobId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::str::FromStr for JobId {
    type Err = JobIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s)
    }
}

impl TryFrom<String> for JobId {
    type Error = JobIdError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::parse(&s)
    }
}

impl From<JobId> for String {
    fn from(id: JobId) -> String {
        id.0
    }
}

/// The directory name for an instance: `n-<name>` when the name is 1–64 characters of
/// `[A-Za-z0-9._-]` not starting with `.`, otherwise `h-<first 32 hex of sha256(name)>`.
/// The two prefixes keep the forms from colliding.
pub fn instance_dir_name(instance: &str) -> String {
    let plain = !instance.is_empty()
        && instance.len() <= 64
        && !instance.starts_with('.')
        && instance.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if plain {
        format!("n-{instance}")
    } else {
        let digest = Sha256::digest(instance.as_bytes());
        let hex: String = digest.iter().take(16).map(|b| format!("{b:02x}")).collect();
        format!("h-{hex}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::os::unix::ffi::OsStrExt;

    #[test]
    fn generated_ids_parse_and_differ() {
        let ids: HashSet<JobId> = (0..1000).map(|_| JobId::generate().unwrap()).collect();
        assert_eq!(ids.len(), 1000);
        for id in &ids {
            assert_eq!(JobId::parse(id.as_str()).as_ref(), Ok(id));
        }
    }

    #[test]
    fn hostile_texts_are_refused() {
        let long = "a".repeat(100_000);
        for bad in [
            "",
            "job_",
            "../../etc/passwd",
            "job_../../../../../../../etc/passwd",
            "job_0123456789ABCDEF0123456789abcdef",
            "job_0123456789abcdef0123456789abcde",
            "job_0123456789abcdef0123456789abcdef0",
            "JOB_0123456789abcdef0123456789abcdef",
            "job_0123456789abcdef0123456789abcde/",
            " job_0123456789abcdef0123456789abcdef",
            "job_0123456789abcdef0123456789abcdeé",
            long.as_str(),
        ] {
            assert!(JobId::parse(bad).is_err(), "{bad:.40}");
        }
        assert!(JobId::parse_os(OsStr::from_bytes(b"job_\xff")).is_err());
        assert!(JobId::parse("job_0123456789abcdef0123456789abcdef").is_ok());
    }

    #[test]
    fn serde_validates() {
        assert!(serde_json::from_str::<JobId>("\"../x\"").is_err());
        let id = JobId::generate().unwrap();
        let json = serde_json::to_string(&id).unwrap();
        assert_eq!(serde_json::from_str::<JobId>(&json).unwrap(), id);
    }

    #[test]
    fn instance_names_become_safe_components() {
        assert_eq!(instance_dir_name("default"), "n-default");
        for hostile in ["", "..", ".", "../x", "a/b", "x y", &"z".repeat(65), "n-x"] {
            let d = instance_dir_name(hostile);
            assert!(!d.contains('/') && d != "." && d != "..", "{hostile}");
            assert!(d.starts_with("n-") || d.starts_with("h-"));
        }
        assert_ne!(instance_dir_name("a/b"), instance_dir_name("a_b"));
    }
}
