//! Stage: profile. The vendor's `conform.toml`: which invocations of the tool have which
//! character (the roles), how to prepare a sandbox for them, how to select an instance.
//!
//! Long-running behaviour cannot be provoked from a manifest alone, so the profile names it.
//! conform never runs a mutating or destructive command that the profile did not name: the
//! roles and the kit probes are the only invocations of such commands it makes. The format is
//! documented in the crate docs (the manual); `schemas/profile.json` describes it as a JSON
//! Schema. An invalid profile is an `ARG_ERROR` (2) with the file, line and column, and nothing
//! runs.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::scenario::{Placement, ProbeKind, StdinKind, line_col};

pub mod kit;

pub use crate::scenario::ROLE_NAMES;

/// The file `conform run` reads when `--profile` is not given.
pub const DEFAULT_PROFILE: &str = "conform.toml";

/// A profile as written (paths not yet resolved).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProfileFile {
    /// Tool-wide settings.
    #[serde(default)]
    pub tool: ToolSection,
    /// The roles, by name.
    #[serde(default)]
    pub roles: Roles,
    /// The spec kit's probes.
    #[serde(default)]
    pub kit: Kit,
    /// How a run's results decide conform's exit code.
    #[serde(default)]
    pub gate: Gate,
}

/// `[gate]`: the vendor's gate on top of the spec's levels.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gate {
    /// A `should` scenario that fails makes the run not conformant (exit 80), as a `must`
    /// does; `conform run --strict` says the same for one run. The spec's level claims are
    /// judged as the spec says either way.
    #[serde(default)]
    pub strict: bool,
    /// `must` scenarios not judged for a reason the vendor can fix (a role the profile lacks,
    /// a role with too little work) leave the run green (exit 0) instead of `UNJUDGED` (82);
    /// the report still lists them. `conform run --allow-unjudged` says the same for one run.
    #[serde(default)]
    pub allow_unjudged: bool,
}

/// `[tool]`.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolSection {
    /// Environment for every invocation of the tool.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The variable that selects an instance (e.g. `MYTOOL_INSTANCE_ID`).
    #[serde(default)]
    pub instance_env: Option<String>,
    /// The flag that selects an instance (e.g. `--instance-id`); wins over `instance_env`.
    #[serde(default)]
    pub instance_flag: Option<String>,
    /// The tool and its leading arguments, used when `conform run` is given no TOOL: a first
    /// element holding `/` is a path relative to the profile, a bare one is looked up in
    /// `PATH`; the rest go before the arguments of every invocation of the tool.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// How conform writes the value of a `--timeout` it passes. The spec fixes the syntax of
    /// `--budget <duration>` only; a tool's `--timeout` may take a duration (`920ms`, the
    /// default), whole milliseconds (`920`) or seconds (`0.92`).
    #[serde(default)]
    pub timeout_format: TimeoutFormat,
    /// How conform writes the value of a `--budget` it passes. REQ-F-080 writes it
    /// `--budget <duration>` and shows `5s` and `0`: by default whole seconds go as `5s` and
    /// the rest as milliseconds with their unit (`750ms`); `seconds` writes every value in
    /// seconds with their unit (`0.75s`), for a tool whose durations know no milliseconds.
    #[serde(default)]
    pub budget_format: BudgetFormat,
}

/// How a `--budget` value is written (see [`ToolSection::budget_format`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum BudgetFormat {
    /// `5s` where the value is whole seconds, else `750ms`; `0` for none.
    #[default]
    Duration,
    /// `0.75s`, `5s`; `0` for none.
    Seconds,
}

impl BudgetFormat {
    /// The value of `--budget` for this duration.
    pub fn render(self, d: std::time::Duration) -> String {
        let ms = d.as_millis();
        match self {
            _ if ms == 0 => "0".to_owned(),
            BudgetFormat::Duration if ms % 1000 == 0 => format!("{}s", ms / 1000),
            BudgetFormat::Duration => format!("{ms}ms"),
            BudgetFormat::Seconds => format!("{}s", TimeoutFormat::Seconds.render(d)),
        }
    }
}

/// How a `--timeout` value is written (see [`ToolSection::timeout_format`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TimeoutFormat {
    /// `920ms` (and `0` for none), the form `--budget` takes.
    #[default]
    Duration,
    /// `920`: whole milliseconds.
    Milliseconds,
    /// `0.92`: seconds, with a decimal fraction when needed.
    Seconds,
}

impl TimeoutFormat {
    /// The value of `--timeout` for this duration.
    pub fn render(self, d: std::time::Duration) -> String {
        let ms = d.as_millis();
        match self {
            TimeoutFormat::Duration if ms == 0 => "0".to_owned(),
            TimeoutFormat::Duration => format!("{ms}ms"),
            TimeoutFormat::Milliseconds => ms.to_string(),
            TimeoutFormat::Seconds if ms % 1000 == 0 => (ms / 1000).to_string(),
            TimeoutFormat::Seconds => {
                let text = format!("{}.{:03}", ms / 1000, ms % 1000);
                text.trim_end_matches('0').to_owned()
            }
        }
    }
}

/// `[roles.*]`: one optional table per known role.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Roles {
    /// A `detach: true` command whose work takes at least about a second.
    #[serde(default)]
    pub detach: Option<Role>,
    /// A `detach: true` command that reads its input from stdin: the role's `stdin_text`,
    /// which a step's `stdin_text` replaces.
    #[serde(default)]
    pub detach_stdin: Option<Role>,
    /// A read-only `resume: true`, `detach: false` command.
    #[serde(default)]
    pub resume_reader: Option<Role>,
    /// A mutating `resume: true`, `detach: false` command.
    #[serde(default)]
    pub resume_writer: Option<Role>,
    /// A `detach: true`, `resume: false` command.
    #[serde(default)]
    pub detach_only: Option<Role>,
    /// A command without interruption that outlives a short `--timeout`.
    #[serde(default)]
    pub plain_slow: Option<Role>,
    /// An `async: true` command (returns a job at once).
    #[serde(default)]
    pub r#async: Option<Role>,
    /// A `detach: true` command whose progress stops (for the background job's idle
    /// watchdog).
    #[serde(default)]
    pub stalling: Option<Role>,
    /// A writer that takes `--idempotency-key` (REQ-C-007), interruptible or not; its work
    /// ends well within the default budget.
    #[serde(default)]
    pub idempotent_writer: Option<Role>,
    /// A `detach: true` command whose work ends with a non-zero exit of its own after some
    /// real work (longer than about 1.2 s), so its failure is seen through `job wait`.
    #[serde(default)]
    pub failing: Option<Role>,
    /// An interruptible command whose work outlasts the `max_lifetime_ms` it declares with the
    /// role's environment (a setting of the tool's own that shortens it to a few seconds).
    #[serde(default)]
    pub short_lifetime: Option<Role>,
    /// A `detach: true` command whose uninterrupted work takes more than about 12 s: longer
    /// than REQ-C-034's 10 s between two progress reports, so the bound can be judged. Opt-in
    /// ([`crate::scenario::OPT_IN_ROLES`]).
    #[serde(default)]
    pub long_work: Option<Role>,
}

#[cfg(test)]
mod timeout_format_tests {
    use super::TimeoutFormat;
    use std::time::Duration;

    #[test]
    fn each_format_writes_the_same_duration_its_own_way() {
        let d = Duration::from_millis(920);
        assert_eq!(TimeoutFormat::Duration.render(d), "920ms");
        assert_eq!(TimeoutFormat::Milliseconds.render(d), "920");
        assert_eq!(TimeoutFormat::Seconds.render(d), "0.92");
        assert_eq!(TimeoutFormat::Seconds.render(Duration::from_millis(2000)), "2");
        assert_eq!(TimeoutFormat::Seconds.render(Duration::from_millis(1005)), "1.005");
        assert_eq!(TimeoutFormat::Duration.render(Duration::ZERO), "0");
    }

    /// REQ-F-080's own forms: `5s` where exact, and `0`; the rest in milliseconds, or in
    /// seconds for a tool that asks so.
    #[test]
    fn a_budget_goes_in_the_spec_s_forms() {
        use super::BudgetFormat;
        assert_eq!(BudgetFormat::Duration.render(Duration::from_millis(2000)), "2s");
        assert_eq!(BudgetFormat::Duration.render(Duration::from_millis(750)), "750ms");
        assert_eq!(BudgetFormat::Duration.render(Duration::ZERO), "0");
        assert_eq!(BudgetFormat::Seconds.render(Duration::from_millis(750)), "0.75s");
        assert_eq!(BudgetFormat::Seconds.render(Duration::from_millis(3000)), "3s");
        assert_eq!(BudgetFormat::Seconds.render(Duration::ZERO), "0");
    }
}

impl Role {
    /// The role's standard input: its text, its kind, or closed.
    pub fn stdin_mode(&self) -> crate::exec::StdinMode {
        match (&self.stdin_text, self.stdin) {
            (Some(text), _) => crate::exec::StdinMode::Bytes(text.clone().into_bytes()),
            (None, Some(kind)) => kind.mode(),
            (None, None) => crate::exec::StdinMode::Closed,
        }
    }
}

impl Roles {
    /// The defined roles by name.
    pub fn by_name(&self) -> BTreeMap<&'static str, &Role> {
        let all = [
            ("detach", &self.detach),
            ("detach_stdin", &self.detach_stdin),
            ("resume_reader", &self.resume_reader),
            ("resume_writer", &self.resume_writer),
            ("detach_only", &self.detach_only),
            ("plain_slow", &self.plain_slow),
            ("async", &self.r#async),
            ("stalling", &self.stalling),
            ("idempotent_writer", &self.idempotent_writer),
            ("failing", &self.failing),
            ("short_lifetime", &self.short_lifetime),
            ("long_work", &self.long_work),
        ];
        all.into_iter().filter_map(|(n, r)| r.as_ref().map(|r| (n, r))).collect()
    }

    /// The place of a role by name (`None` for a name no role has).
    pub fn slot_mut(&mut self, name: &str) -> Option<&mut Option<Role>> {
        Some(match name {
            "detach" => &mut self.detach,
            "detach_stdin" => &mut self.detach_stdin,
            "resume_reader" => &mut self.resume_reader,
            "resume_writer" => &mut self.resume_writer,
            "detach_only" => &mut self.detach_only,
            "plain_slow" => &mut self.plain_slow,
            "async" => &mut self.r#async,
            "stalling" => &mut self.stalling,
            "idempotent_writer" => &mut self.idempotent_writer,
            "failing" => &mut self.failing,
            "short_lifetime" => &mut self.short_lifetime,
            "long_work" => &mut self.long_work,
            _ => return None,
        })
    }
}

/// One role: an invocation with a known character.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Role {
    /// Arguments after the tool, e.g. `["analyze", "big.csv"]`.
    pub argv: Vec<String>,
    /// Extra environment for this role.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// Shell commands run (`sh -c`) in the sandbox's working directory before each scenario.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files or directories (relative to the profile) copied into the sandbox's working
    /// directory, under their own names.
    #[serde(default)]
    pub fixtures: Vec<String>,
    /// How stdin is wired when a step does not say.
    #[serde(default)]
    pub stdin: Option<StdinKind>,
    /// Bytes written to stdin when a step does not say (excludes `stdin`).
    #[serde(default)]
    pub stdin_text: Option<String>,
    /// The effect oracle: a command line (`sh -c` in the sandbox's working directory, once the
    /// work ended) that prints the observable state the work leaves, e.g. a count, a distinct
    /// count and a sum of the rows it wrote. Scenarios that interrupt the work compare it with
    /// what it printed after the uninterrupted calibration run.
    #[serde(default)]
    pub verify: Option<String>,
    /// JSON pointers (`/data/slept_ms`) to values of the role's responses that the tool
    /// measures anew on every run: replaced before any comparison with the calibrated
    /// response ([`crate::redact`]), so that the rest is compared.
    #[serde(default)]
    pub redact: Vec<String>,
}

/// `[kit]`: the spec kit's probes (its JSON profile maps onto these).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Kit {
    /// Safe invocations that must finish without side effects.
    #[serde(default)]
    pub read: Vec<Vec<String>>,
    /// Invocations that must be refused with ARG_ERROR 2.
    #[serde(default)]
    pub invalid: Vec<Vec<String>>,
    /// Destructive invocations that must refuse without confirmation.
    #[serde(default)]
    pub destructive: Vec<DestructiveProbe>,
    /// Shell commands run (`sh -c`) in the sandbox's working directory before a scenario that
    /// runs any kit probe (after the fixtures are copied).
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files or directories (relative to the profile) copied into the sandbox of a scenario
    /// that runs any kit probe.
    #[serde(default)]
    pub fixtures: Vec<String>,
    /// The limit of every kit probe step, in seconds, in `(0, 120]`: a run still going then is
    /// killed and fails (a hang), as in the kit. Default: conform's own step limit.
    #[serde(default)]
    pub timeout_seconds: Option<f64>,
    /// The arguments that print the manifest (default `["manifest"]`); discovery uses them.
    #[serde(default)]
    pub manifest: Option<Vec<String>>,
    /// Commands whose stdout is a JSONL stream (REQ-O-004).
    #[serde(default)]
    pub stream: Vec<StreamProbe>,
    /// A side-effect-free command and a global option to move around it (REQ-F-067, F-079).
    #[serde(default)]
    pub argument_order: Option<ArgumentOrder>,
    /// Every sandbox's working directory starts as a copy of the profile's directory: set for a
    /// kit JSON profile, whose probes name files beside it (the kit runs them there).
    #[serde(skip)]
    pub copy_profile_dir: bool,
}

/// The longest `[kit] timeout_seconds` (the kit's own bound).
pub const MAX_KIT_TIMEOUT_SECONDS: f64 = 120.0;

/// The longest `deadline_seconds` of a stream probe.
pub const MAX_STREAM_DEADLINE_SECONDS: f64 = 600.0;

/// The only signal a stream probe may ask for.
pub const STREAM_SIGNAL: &str = "INT";

/// `[[kit.stream]]`: a command whose stdout is a JSONL stream.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamProbe {
    /// Arguments after the tool.
    pub argv: Vec<String>,
    /// How long the stream may run before its process group is killed (a failure), in
    /// seconds, in `(0, 600]`; default `[kit] timeout_seconds`, else conform's step limit.
    #[serde(default)]
    pub deadline_seconds: Option<f64>,
    /// `"INT"`: send SIGINT to the tool's process after `after_lines` stdout lines.
    #[serde(default)]
    pub signal: Option<String>,
    /// How many stdout lines are read before the signal is sent (at least 1).
    #[serde(default)]
    pub after_lines: Option<u64>,
    /// Shell commands run (`sh -c`) in the sandbox before a scenario that runs stream probes.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files or directories (relative to the profile) copied into the sandbox of a scenario
    /// that runs stream probes.
    #[serde(default)]
    pub fixtures: Vec<String>,
}

/// `[kit.argument_order]`: what the argument-order scenarios move around.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ArgumentOrder {
    /// The command's path words (e.g. `["files"]`), non-empty.
    pub command_path: Vec<String>,
    /// A command-local option and its value (e.g. `["--limit", "3"]`).
    pub local_args: Vec<String>,
    /// A global long option (e.g. `--output`).
    pub global_flag: String,
    /// A value of it whose stdout is one envelope (e.g. `json`).
    pub value: String,
    /// Another accepted value giving different stdout (e.g. `text`).
    pub alternate_value: String,
    /// A positional of the command, for the option-after-positional checks.
    #[serde(default)]
    pub positional: Option<String>,
    /// Shell commands run (`sh -c`) in the sandbox before a scenario that uses it.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files or directories (relative to the profile) copied into the sandbox of a scenario
    /// that uses it.
    #[serde(default)]
    pub fixtures: Vec<String>,
}

impl ArgumentOrder {
    /// The argv of this placement, or `None` when it needs a positional the profile lacks.
    pub fn argv(&self, placement: Placement) -> Option<Vec<String>> {
        let flag = || vec![self.global_flag.clone(), self.value.clone()];
        let alternate = || vec![self.global_flag.clone(), self.alternate_value.clone()];
        let path = || self.command_path.clone();
        let local = || self.local_args.clone();
        let parts: Vec<Vec<String>> = match placement {
            Placement::ValueBeforePath => vec![flag(), path(), local()],
            Placement::ValueBetween => vec![path(), flag(), local()],
            Placement::ValueAfterLocal => vec![path(), local(), flag()],
            Placement::AlternateBeforePath => vec![alternate(), path(), local()],
            Placement::AlternateBetween => vec![path(), alternate(), local()],
            Placement::AlternateAfterLocal => vec![path(), local(), alternate()],
            Placement::ConflictingRepeat => vec![flag(), path(), local(), alternate()],
            Placement::SameValueRepeat => vec![flag(), path(), local(), flag()],
            Placement::PositionalThenLocal => vec![path(), vec![self.positional.clone()?], local()],
            Placement::LocalThenPositional => vec![path(), local(), vec![self.positional.clone()?]],
            Placement::PositionalAlone => vec![path(), vec![self.positional.clone()?]],
        };
        Some(parts.concat())
    }
}

/// A destructive probe: run without confirmation, and with its preview flag.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DestructiveProbe {
    /// Arguments after the tool.
    pub argv: Vec<String>,
    /// The flag that turns it into a preview.
    pub dry_run_flag: String,
    /// Shell commands run (`sh -c`) in the sandbox before a scenario that runs destructive
    /// probes (after `[kit]`'s own setup): they make what the probe would destroy.
    #[serde(default)]
    pub setup: Vec<String>,
    /// Files or directories (relative to the profile) copied into the sandbox of a scenario
    /// that runs destructive probes.
    #[serde(default)]
    pub fixtures: Vec<String>,
}

/// Flags that confirm a destructive command: no kit probe carries one, since conform must
/// never confirm destruction by itself.
pub const CONFIRMATION_FLAGS: [&str; 4] =
    ["--yes", "--force", "--confirm", "--confirm-destructive"];

/// Their short forms, refused in destructive probes only (a read probe may well mean
/// `-f` as "follow").
pub const SHORT_CONFIRMATION_FLAGS: [&str; 2] = ["-y", "-f"];

/// A validated profile with its paths resolved.
#[derive(Debug, Clone, Default)]
pub struct Profile {
    /// Where the profile was read from (`None`: no profile).
    pub path: Option<PathBuf>,
    /// Its contents.
    pub file: ProfileFile,
}

/// A profile that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("{file}{}: {message}", location.map(|(l, c)| format!(":{l}:{c}")).unwrap_or_default())]
pub struct ProfileError {
    /// The profile's path as given.
    pub file: String,
    /// 1-based line and column, when known.
    pub location: Option<(usize, usize)>,
    /// What is wrong.
    pub message: String,
}

impl Profile {
    /// The arguments of the manifest command: `[kit] manifest` (the kit profile's
    /// `manifest`), else `manifest`.
    pub fn manifest_args(&self) -> Vec<String> {
        self.file.kit.manifest.clone().unwrap_or_else(|| vec!["manifest".to_owned()])
    }

    /// The argument lists of the profile's kit probes of one kind (a preview appends the probe's
    /// `dry_run_flag`).
    pub fn probe_argvs(&self, kind: ProbeKind) -> Vec<Vec<String>> {
        let kit = &self.file.kit;
        match kind {
            ProbeKind::Read => kit.read.clone(),
            ProbeKind::Invalid => kit.invalid.clone(),
            ProbeKind::Destructive => kit.destructive.iter().map(|p| p.argv.clone()).collect(),
            ProbeKind::DestructivePreview => kit
                .destructive
                .iter()
                .map(|p| p.argv.iter().cloned().chain([p.dry_run_flag.clone()]).collect())
                .collect(),
            ProbeKind::Stream => kit.stream.iter().map(|p| p.argv.clone()).collect(),
            ProbeKind::Manifest => vec![self.manifest_args()],
            ProbeKind::Help => vec![vec!["--help".to_owned()]],
            ProbeKind::Any => {
                let destructive = kit.destructive.iter().map(|p| p.argv.clone());
                kit.read.iter().chain(&kit.invalid).cloned().chain(destructive).collect()
            }
            ProbeKind::StreamSignal => {
                kit.stream.iter().filter(|p| p.signal.is_some()).map(|p| p.argv.clone()).collect()
            }
        }
    }

    /// The stream probes a step of this kind runs (in order).
    pub fn stream_probes(&self, kind: ProbeKind) -> Vec<&StreamProbe> {
        let all = self.file.kit.stream.iter();
        match kind {
            ProbeKind::Stream => all.collect(),
            ProbeKind::StreamSignal => all.filter(|p| p.signal.is_some()).collect(),
            _ => Vec::new(),
        }
    }

    /// No profile: only static and quick checks run; role scenarios are skipped.
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads and validates a profile file (a regular file of at most
    /// [`crate::input::TEXT_LIMIT`] bytes).
    pub fn load(path: &Path) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let text =
            crate::input::read_text(path, crate::input::TEXT_LIMIT).map_err(|e| ProfileError {
                file: shown.clone(),
                location: None,
                message: format!("failed to read the profile: {e}"),
            })?;
        Self::parse(path, &text)
    }

    /// Parses and validates profile text; `path` resolves fixture paths. A path ending in
    /// `.json` is a profile of the spec's conformance kit ([`kit`]): its probes become `[kit]`.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        if path.extension().is_some_and(|e| e == "json") {
            return Self::parse_kit(path, text);
        }
        let file: ProfileFile = toml::from_str(text).map_err(|e| ProfileError {
            file: shown.clone(),
            location: e.span().map(|s| line_col(text, s.start)),
            message: e.message().trim().to_owned(),
        })?;
        let profile = Profile { path: Some(path.to_path_buf()), file };
        profile.validate().map_err(|(key, message)| ProfileError {
            file: shown,
            location: key.and_then(|k| locate_key(text, &k)),
            message,
        })?;
        Ok(profile)
    }

    /// A kit profile (JSON), mapped onto a profile with a `[kit]` and nothing else.
    fn parse_kit(path: &Path, text: &str) -> Result<Self, ProfileError> {
        let shown = path.display().to_string();
        let parsed: kit::KitProfile = serde_json::from_str(text).map_err(|e| ProfileError {
            file: shown.clone(),
            location: (e.line() > 0).then(|| (e.line(), e.column())),
            message: format!("not a conformance-kit profile: {e}"),
        })?;
        let kit = parsed.to_kit().map_err(|(key, message)| ProfileError {
            file: shown.clone(),
            location: key.and_then(|k| locate_key(text, &k)),
            message,
        })?;
        let profile = Profile {
            path: Some(path.to_path_buf()),
            file: ProfileFile {
                tool: ToolSection {
                    command: Some(parsed.command.clone()),
                    ..ToolSection::default()
                },
                kit,
                ..ProfileFile::default()
            },
        };
        profile.validate().map_err(|(key, message)| ProfileError {
            file: shown,
            location: key.and_then(|k| locate_key(text, &k)),
            message,
        })?;
        Ok(profile)
    }

    /// The directory fixture paths are relative to.
    pub fn base_dir(&self) -> PathBuf {
        match self.path.as_deref().and_then(Path::parent) {
            Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
            _ => PathBuf::from("."),
        }
    }

    /// A role by name, if the profile defines it.
    pub fn role(&self, name: &str) -> Option<&Role> {
        self.file.roles.by_name().get(name).copied()
    }

    /// The absolute path of a fixture.
    pub fn fixture_path(&self, fixture: &str) -> PathBuf {
        self.base_dir().join(fixture)
    }

    /// Whether the profile says how to select an instance.
    pub fn selects_instances(&self) -> bool {
        self.file.tool.instance_env.is_some() || self.file.tool.instance_flag.is_some()
    }

    /// Checks what serde cannot; an error names the offending key (to locate it) and says why.
    fn validate(&self) -> Result<(), (Option<String>, String)> {
        let tool = &self.file.tool;
        check_env(&tool.env, "tool.env")?;
        if let Some(var) = &tool.instance_env
            && !valid_env_name(var)
        {
            return Err((Some("instance_env".into()), format!("`{var}` is not a variable name")));
        }
        if let Some(flag) = &tool.instance_flag
            && (!flag.starts_with('-') || flag.contains(char::is_whitespace))
        {
            return Err((
                Some("instance_flag".into()),
                format!("`{flag}` is not a flag (like --instance-id)"),
            ));
        }
        for (name, role) in self.file.roles.by_name() {
            let at = Some(format!("roles.{name}"));
            if role.argv.is_empty() || role.argv.iter().all(|a| a.trim().is_empty()) {
                return Err((at, format!("role `{name}` has an empty `argv`")));
            }
            check_env(&role.env, &format!("roles.{name}.env"))?;
            if role.stdin.is_some() && role.stdin_text.is_some() {
                return Err((
                    at,
                    format!("role `{name}`: `stdin` and `stdin_text` exclude each other"),
                ));
            }
            if let Some(p) = role.redact.iter().find(|p| !p.starts_with('/')) {
                return Err((
                    at,
                    format!(
                        "role `{name}`: `redact` takes JSON pointers like /data/slept_ms, not `{p}`"
                    ),
                ));
            }
            self.check_preparation(&role.fixtures, &role.setup, &format!("role `{name}`"), at)?;
        }
        if let Some(command) = &tool.command
            && (command.is_empty() || command.iter().any(|c| c.trim().is_empty()))
        {
            return Err((
                Some("command".into()),
                "`[tool] command` needs at least one element, none of them blank".into(),
            ));
        }
        let kit = &self.file.kit;
        for argv in &kit.read {
            self.check_probe(argv, false, "a read probe", "read", &[], &[])?;
        }
        for argv in &kit.invalid {
            self.check_probe(argv, false, "an invalid probe", "invalid", &[], &[])?;
        }
        for probe in &kit.destructive {
            self.check_probe(
                &probe.argv,
                true,
                "a destructive probe",
                "destructive",
                &probe.fixtures,
                &probe.setup,
            )?;
            if !probe.dry_run_flag.starts_with('-') {
                return Err((
                    Some("dry_run_flag".into()),
                    format!("`{}` is not a flag (like --dry-run)", probe.dry_run_flag),
                ));
            }
        }
        if let Some(t) = kit.timeout_seconds
            && !(t > 0.0 && t <= MAX_KIT_TIMEOUT_SECONDS)
        {
            return Err((
                Some("timeout_seconds".into()),
                format!("`timeout_seconds` {t} is not in (0, {MAX_KIT_TIMEOUT_SECONDS}]"),
            ));
        }
        if let Some(manifest) = &kit.manifest
            && (manifest.is_empty() || manifest.iter().any(|a| a.trim().is_empty()))
        {
            return Err((
                Some("manifest".into()),
                "`manifest` needs at least one argument, none of them blank".into(),
            ));
        }
        for probe in &kit.stream {
            self.check_probe(
                &probe.argv,
                false,
                "a stream probe",
                "stream",
                &probe.fixtures,
                &probe.setup,
            )?;
            check_stream_probe(probe)?;
        }
        if let Some(order) = &kit.argument_order {
            self.check_argument_order(order)?;
        }
        self.check_preparation(&kit.fixtures, &kit.setup, "`[kit]`", Some("kit".into()))?;
        Ok(())
    }

    /// What every kit probe must be, whatever its kind: a non-empty argv that does not confirm
    /// itself (the short forms count in a destructive probe), and usable fixtures and setup.
    /// `owner` names the probe in messages, `key` is the key to locate.
    fn check_probe(
        &self,
        argv: &[String],
        destructive: bool,
        owner: &str,
        key: &str,
        fixtures: &[String],
        setup: &[String],
    ) -> Result<(), (Option<String>, String)> {
        if argv.is_empty() {
            return Err((Some(key.into()), format!("{owner} has an empty argv")));
        }
        if let Some(bad) = argv.iter().find(|a| is_confirmation(a, destructive)) {
            return Err((
                Some(bad.clone()),
                format!(
                    "a kit probe must not confirm itself (`{bad}`): conform never confirms a destructive command"
                ),
            ));
        }
        self.check_preparation(fixtures, setup, owner, Some(key.into()))
    }

    /// `[kit.argument_order]`: every part present and usable, the two values different.
    fn check_argument_order(&self, order: &ArgumentOrder) -> Result<(), (Option<String>, String)> {
        let at = |k: &str| Some(k.to_owned());
        if order.command_path.is_empty() || order.command_path.iter().any(|w| w.trim().is_empty()) {
            return Err((at("command_path"), "`command_path` needs non-blank words".into()));
        }
        if order.local_args.is_empty() || order.local_args.iter().any(|w| w.is_empty()) {
            return Err((
                at("local_args"),
                "`local_args` needs a command-local option (and its value)".into(),
            ));
        }
        let flag = &order.global_flag;
        if !flag.starts_with("--") || flag.len() < 3 || flag.contains(char::is_whitespace) {
            return Err((at("global_flag"), format!("`{flag}` is not a long option (--...)")));
        }
        if order.value.is_empty() || order.alternate_value.is_empty() {
            return Err((at("value"), "`value` and `alternate_value` must not be empty".into()));
        }
        if order.value == order.alternate_value {
            return Err((
                at("alternate_value"),
                format!(
                    "`alternate_value` equals `value` (`{}`): it must give different stdout",
                    order.value
                ),
            ));
        }
        if order.positional.as_deref().is_some_and(str::is_empty) {
            return Err((at("positional"), "`positional` is empty".into()));
        }
        let words = order.command_path.iter().chain(&order.local_args).chain(&order.positional);
        let all: Vec<String> = words.cloned().chain([flag.clone()]).collect();
        self.check_probe(
            &all,
            false,
            "`[kit.argument_order]`",
            "argument_order",
            &order.fixtures,
            &order.setup,
        )
    }

    /// Fixtures must exist and have a file name; setup lines must not be blank. `owner` names
    /// the role or probe in the message, `at` is the key to locate.
    fn check_preparation(
        &self,
        fixtures: &[String],
        setup: &[String],
        owner: &str,
        at: Option<String>,
    ) -> Result<(), (Option<String>, String)> {
        for fixture in fixtures {
            let p = self.fixture_path(fixture);
            if !p.exists() {
                return Err((
                    Some(fixture.clone()),
                    format!("{owner}: fixture `{fixture}` does not exist ({})", p.display()),
                ));
            }
            if Path::new(fixture).file_name().is_none() {
                return Err((
                    Some(fixture.clone()),
                    format!("{owner}: fixture `{fixture}` has no file name"),
                ));
            }
        }
        if setup.iter().any(|line| line.trim().is_empty()) {
            return Err((at, format!("{owner} has an empty setup command")));
        }
        Ok(())
    }
}

/// Whether an argument confirms a destructive command (`--yes`, or `--yes=true` and the like;
/// the short forms count in a destructive probe).
fn is_confirmation(arg: &str, destructive: bool) -> bool {
    let flag = arg.split_once('=').map_or(arg, |(flag, _)| flag);
    CONFIRMATION_FLAGS.contains(&flag) || (destructive && SHORT_CONFIRMATION_FLAGS.contains(&flag))
}

/// A stream probe's own rules: the deadline in range, `signal` only `INT` and only together
/// with `after_lines` (at least 1).
fn check_stream_probe(probe: &StreamProbe) -> Result<(), (Option<String>, String)> {
    if let Some(d) = probe.deadline_seconds
        && !(d > 0.0 && d <= MAX_STREAM_DEADLINE_SECONDS)
    {
        return Err((
            Some("deadline_seconds".into()),
            format!("`deadline_seconds` {d} is not in (0, {MAX_STREAM_DEADLINE_SECONDS}]"),
        ));
    }
    if let Some(signal) = &probe.signal
        && signal != STREAM_SIGNAL
    {
        return Err((
            Some("signal".into()),
            format!(
                "`signal` `{signal}` is not `{STREAM_SIGNAL}` (the only one a stream probe sends)"
            ),
        ));
    }
    match (&probe.signal, probe.after_lines) {
        (Some(_), None) => Err((
            Some("signal".into()),
            "`signal` needs `after_lines` (how many lines to read first)".into(),
        )),
        (None, Some(_)) => Err((Some("after_lines".into()), "`after_lines` needs `signal`".into())),
        (_, Some(0)) => {
            Err((Some("after_lines".into()), "`after_lines` must be at least 1".into()))
        }
        _ => Ok(()),
    }
}

fn valid_env_name(name: &str) -> bool {
    !name.is_empty()
        && !name.starts_with(|c: char| c.is_ascii_digit())
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// The sandbox variables a profile's `env` value may use: `{sandbox}`, the sandbox root, and
/// `{work}`, its working directory. They are filled in per scenario, so a tool that keeps its
/// state under a variable of its own (`NOTES_HOME = "{sandbox}/notes"`) gets a fresh directory
/// in every sandbox without a wrapper script.
pub const ENV_VARS: [&str; 2] = ["sandbox", "work"];

/// Why a profile `env` value is not a usable template.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvTemplateError {
    /// A `{...}` names something other than [`ENV_VARS`].
    #[error(
        "`{{{0}}}` is not a sandbox variable (a profile's env value may use `{{sandbox}}` and `{{work}}`; `{{{{` and `}}}}` are literal braces)"
    )]
    UnknownVariable(String),
    /// A brace that opens or closes nothing.
    #[error("{0} (`{{{{` and `}}}}` are literal braces)")]
    Braces(String),
}

/// An `env` value of the profile with the sandbox's paths filled in (see [`ENV_VARS`]).
pub fn render_env_value(
    value: &str,
    sandbox: &Path,
    work: &Path,
) -> Result<String, EnvTemplateError> {
    let mut unknown = None;
    let rendered = crate::scenario::walk_template(value, |var| match var {
        crate::scenario::Var::Builtin(name) if name == "sandbox" => {
            Some(sandbox.display().to_string())
        }
        crate::scenario::Var::Builtin(name) if name == "work" => Some(work.display().to_string()),
        other => {
            unknown = Some(var_name(other));
            None
        }
    });
    match (rendered, unknown) {
        (Ok(text), _) => Ok(text),
        (Err(_), Some(name)) => Err(EnvTemplateError::UnknownVariable(name)),
        (Err(message), None) => match unknown_name(value) {
            Some(name) => Err(EnvTemplateError::UnknownVariable(name)),
            None => Err(EnvTemplateError::Braces(message)),
        },
    }
}

/// A profile `env` table rendered for one sandbox. Values were checked when the profile was
/// loaded; one that still fails (a profile built in code, unchecked) is passed on as written.
pub fn render_env(
    env: &BTreeMap<String, String>,
    sandbox: &Path,
    work: &Path,
) -> Vec<(String, String)> {
    env.iter()
        .map(|(k, v)| (k.clone(), render_env_value(v, sandbox, work).unwrap_or_else(|_| v.clone())))
        .collect()
}

/// How a template variable is written inside its braces.
fn var_name(var: &crate::scenario::Var) -> String {
    match var {
        crate::scenario::Var::Calibration(name) | crate::scenario::Var::Builtin(name) => {
            name.clone()
        }
        crate::scenario::Var::StepValue { step, pointer } => format!("@{step}{pointer}"),
    }
}

/// The name inside the first `{...}` that is not a literal brace, when the scenario grammar
/// refused it as a name (`{home}`), as opposed to an unbalanced brace.
fn unknown_name(value: &str) -> Option<String> {
    let mut rest = value;
    while let Some(pos) = rest.find('{') {
        let after = &rest[pos + 1..];
        if let Some(next) = after.strip_prefix('{') {
            rest = next;
            continue;
        }
        let end = after.find('}')?;
        return Some(after[..end].to_owned());
    }
    None
}

fn check_env(env: &BTreeMap<String, String>, table: &str) -> Result<(), (Option<String>, String)> {
    for (k, v) in env {
        if !valid_env_name(k) {
            return Err((Some(k.clone()), format!("`{k}` in `{table}` is not a variable name")));
        }
        if v.contains('\0') {
            return Err((
                Some(k.clone()),
                format!("the value of `{k}` in `{table}` holds a NUL byte"),
            ));
        }
        if let Err(e) = render_env_value(v, Path::new("/sandbox"), Path::new("/sandbox/work")) {
            return Err((Some(k.clone()), format!("the value of `{k}` in `{table}`: {e}")));
        }
    }
    Ok(())
}

/// Line and column of the first line mentioning `key` (for errors serde cannot place).
fn locate_key(text: &str, key: &str) -> Option<(usize, usize)> {
    // A table header, then the key as a quoted string (fixture paths), then its last segment.
    let last = key.rsplit('.').next().unwrap_or(key);
    [format!("[{key}]"), format!("\"{key}\""), key.to_owned(), last.to_owned()]
        .iter()
        .find_map(|needle| text.find(needle.as_str()))
        .map(|offset| line_col(text, offset))
}
