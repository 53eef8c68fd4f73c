//! The spec's own conformance kit describes a tool with a JSON profile (its
//! `schemas/conformance-profile.md`): a display name, the invocation prefix, a per-run time
//! limit, the manifest's arguments, and probes, each with a `kind` saying what a correct tool
//! does with it (`read`, `invalid`, `destructive` with its `dry_run_flag`). conform reads that
//! file as it is, so a vendor who already has one needs nothing else for the kit's checks: a
//! `--profile` ending in `.json` is read in this format and its probes become the profile's
//! `[kit]`. It names no roles, so the §79 scenarios that need one are skipped with the reason.
//!
//! Every field maps onto the TOML profile: `command` is `[tool] command` (what `conform run`
//! runs when given no TOOL), `timeout_seconds` is `[kit] timeout_seconds` (the limit of every
//! kit probe step), `manifest` is `[kit] manifest` (what discovery asks), probes of kind
//! `stream` (with `deadline_seconds`, and `signal` with `after_lines`) are `[[kit.stream]]`,
//! and the top-level `argument_order` object is `[kit.argument_order]` (without setup or
//! fixtures, which the kit does not have). A key that belongs to another kind of probe is
//! refused, as is anything the TOML profile refuses.
//!
//! The kit runs its probes in the directory it is started from, so probes name files there
//! (`--db shop.db`, `site/`). conform never runs a tool outside a sandbox: instead every
//! sandbox's working directory starts as a copy of the profile's directory
//! ([`Kit::copy_profile_dir`], done by [`crate::prepare`]), at most
//! [`crate::prepare::PROFILE_DIR_LIMIT`], symbolic links, `.git` and conform's own sandboxes
//! left out.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::{ArgumentOrder, DestructiveProbe, Kit, StreamProbe};

/// The only format version the kit defines.
pub const KIT_PROFILE_VERSION: &str = "1.0";

use super::MAX_KIT_TIMEOUT_SECONDS as MAX_TIMEOUT_SECONDS;

/// A kit profile as written.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitProfile {
    /// Format version, `"1.0"`.
    pub schema_version: String,
    /// Display name of the tool.
    pub tool: String,
    /// The invocation prefix (conform takes the tool from its command line instead).
    pub command: Vec<String>,
    /// The kit's per-run limit, in `(0, 120]`.
    pub timeout_seconds: f64,
    /// Arguments that print the manifest.
    #[serde(default)]
    pub manifest: Option<Vec<String>>,
    /// The probes.
    pub probes: Vec<KitProbe>,
    /// The command and global option the argument-order checks move around.
    #[serde(default)]
    pub argument_order: Option<ArgumentOrder>,
}

/// What a correct tool does with a probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum KitProbeKind {
    /// Finishes without side effects.
    Read,
    /// Is refused with exit 2.
    Invalid,
    /// Refuses until confirmed; previews with its dry-run flag.
    Destructive,
    /// Writes a JSONL stream (REQ-O-004) on stdout.
    Stream,
}

/// One probe of a kit profile.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KitProbe {
    /// Unique label.
    pub name: String,
    /// Arguments after the tool.
    pub argv: Vec<String>,
    /// Its kind.
    pub kind: KitProbeKind,
    /// The flag that turns a destructive probe into a preview (required for those).
    #[serde(default)]
    pub dry_run_flag: Option<String>,
    /// Stream probes only: how long the stream may run, in seconds.
    #[serde(default)]
    pub deadline_seconds: Option<f64>,
    /// Stream probes only: `"INT"`, sent after `after_lines` lines.
    #[serde(default)]
    pub signal: Option<String>,
    /// Stream probes only: how many lines are read before the signal.
    #[serde(default)]
    pub after_lines: Option<u64>,
}

impl KitProfile {
    /// Checks what serde cannot and maps the probes onto conform's `[kit]`; an error names the
    /// offending key and says why.
    pub fn to_kit(&self) -> Result<Kit, (Option<String>, String)> {
        if self.schema_version != KIT_PROFILE_VERSION {
            return Err((
                Some("schema_version".into()),
                format!(
                    "kit profile version `{}` is not `{KIT_PROFILE_VERSION}`",
                    self.schema_version
                ),
            ));
        }
        if self.tool.trim().is_empty() {
            return Err((Some("tool".into()), "`tool` is empty".into()));
        }
        if self.command.is_empty() || self.command.iter().any(|c| c.is_empty()) {
            return Err((Some("command".into()), "`command` needs non-empty elements".into()));
        }
        if !(self.timeout_seconds > 0.0 && self.timeout_seconds <= MAX_TIMEOUT_SECONDS) {
            return Err((
                Some("timeout_seconds".into()),
                format!("`timeout_seconds` {} is not in (0, 120]", self.timeout_seconds),
            ));
        }
        let mut names = BTreeSet::new();
        let mut kit = Kit::default();
        for probe in &self.probes {
            if !names.insert(probe.name.as_str()) {
                return Err((
                    Some(probe.name.clone()),
                    format!("two probes are named `{}`", probe.name),
                ));
            }
            let stream_keys = [
                ("deadline_seconds", probe.deadline_seconds.is_some()),
                ("signal", probe.signal.is_some()),
                ("after_lines", probe.after_lines.is_some()),
            ];
            if probe.kind != KitProbeKind::Stream
                && let Some((key, _)) = stream_keys.iter().find(|(_, set)| *set)
            {
                return Err((
                    Some((*key).to_owned()),
                    format!("probe `{}`: `{key}` belongs to stream probes only", probe.name),
                ));
            }
            match (probe.kind, &probe.dry_run_flag) {
                (KitProbeKind::Read, _) => kit.read.push(probe.argv.clone()),
                (KitProbeKind::Invalid, _) => kit.invalid.push(probe.argv.clone()),
                (KitProbeKind::Destructive, Some(flag)) => kit.destructive.push(DestructiveProbe {
                    argv: probe.argv.clone(),
                    dry_run_flag: flag.clone(),
                    ..DestructiveProbe::default()
                }),
                (KitProbeKind::Destructive, None) => {
                    return Err((
                        Some(probe.name.clone()),
                        format!("destructive probe `{}` has no `dry_run_flag`", probe.name),
                    ));
                }
                (KitProbeKind::Stream, Some(_)) => {
                    return Err((
                        Some("dry_run_flag".into()),
                        format!(
                            "stream probe `{}`: `dry_run_flag` belongs to destructive probes",
                            probe.name
                        ),
                    ));
                }
                (KitProbeKind::Stream, None) => kit.stream.push(StreamProbe {
                    argv: probe.argv.clone(),
                    deadline_seconds: probe.deadline_seconds,
                    signal: probe.signal.clone(),
                    after_lines: probe.after_lines,
                    ..StreamProbe::default()
                }),
            }
        }
        kit.timeout_seconds = Some(self.timeout_seconds);
        kit.manifest.clone_from(&self.manifest);
        if let Some(order) = &self.argument_order
            && !(order.setup.is_empty() && order.fixtures.is_empty())
        {
            return Err((
                Some("argument_order".into()),
                "the kit's format has no `setup` or `fixtures` in `argument_order`; a conform.toml \
                 `[kit.argument_order]` takes them"
                    .into(),
            ));
        }
        kit.argument_order.clone_from(&self.argument_order);
        // The kit runs every probe in the directory it was started from, beside the profile;
        // conform runs them in a sandbox that starts as a copy of that directory.
        kit.copy_profile_dir = true;
        Ok(kit)
    }
}
