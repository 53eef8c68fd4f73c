//! Warnings the runtime hands to the framework for the envelope's `warnings` array.

use serde::Serialize;

/// One warning, shaped like an envelope `warnings` entry (`{code, message, context?}`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RuntimeWarning {
    /// Machine-readable code, e.g. `CHECKPOINT_DISCARDED`.
    pub code: &'static str,
    /// One sentence for a person.
    pub message: String,
    /// Extra facts (the offending value, the job id), when there are any.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<serde_json::Value>,
}

/// A checkpoint was found but its input fingerprint no longer matches; the work starts over.
pub const CHECKPOINT_DISCARDED: &str = "CHECKPOINT_DISCARDED";
