//! Stage: prepare. A sandbox made ready for what one scenario (or one calibration, or the
//! discovery call) needs: the profile's `[tool] env`, a copy of a kit JSON profile's directory
//! (its probes name files beside it), then the fixtures and setup lines of its roles, then
//! those of the kit probes its steps run.
//!
//! It exists apart from [`crate::sandbox`] because it knows the profile: the sandbox is a
//! directory and an environment, this stage decides what goes in it. Roles and kit probes
//! are prepared by one mechanism (a `Part` each), so a fixture or a failing setup line reads the
//! same wherever it comes from. Every setup line runs through [`Sandbox::run_setup_with`],
//! with the tool in [`TOOL_ENV`], the sandbox root in [`SANDBOX_DIR_ENV`] and, for a role, the
//! role's environment. `{sandbox}` and `{work}` in the profile's `env` values are the sandbox's
//! paths ([`crate::profile::render_env`]).
//!
//! Each prepared sandbox is registered with [`crate::interrupt`] for as long as it lives, so
//! a Ctrl-C of conform stops its processes and removes it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::interrupt::{self, Registration};
use crate::profile::{Profile, render_env};
use crate::sandbox::{CopyLimit, Sandbox, SandboxError};
use crate::scenario::ProbeKind;
use crate::tool::{TOOL_ENV, Tool};

/// The variable holding the sandbox root in every setup command. (`CONFORM_SANDBOX` is taken:
/// it is the marker every process of the sandbox carries, [`crate::sandbox::MARKER_VAR`].)
pub const SANDBOX_DIR_ENV: &str = "CONFORM_SANDBOX_DIR";

/// How much of a kit JSON profile's directory is copied into each sandbox at most.
pub const PROFILE_DIR_LIMIT: CopyLimit = CopyLimit { entries: 10_000, bytes: 64 * 1024 * 1024 };

/// Bound on a setup command.
pub const SETUP_LIMIT: Duration = Duration::from_secs(120);

/// What a sandbox is prepared for.
#[derive(Debug, Clone, Copy, Default)]
pub struct Needs<'a> {
    /// The profile roles whose fixtures and setup go in.
    pub roles: &'a [&'a str],
    /// The kinds of kit probe the steps run.
    pub probes: &'a [ProbeKind],
    /// Whether the steps use `[kit.argument_order]`.
    pub argument_order: bool,
}

/// Why a sandbox could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// conform was interrupted: nothing new starts.
    #[error("{0}")]
    Interrupted(#[from] crate::interrupt::Interrupted),
    /// The sandbox itself could not be made.
    #[error("{0}")]
    Sandbox(#[source] SandboxError),
    /// The script that runs the whole tool command for setup lines could not be written.
    #[error("writing {}: {source}", path.display())]
    SetupProgram {
        /// Where it was to go.
        path: PathBuf,
        /// Why it failed.
        #[source]
        source: std::io::Error,
    },
    /// A fixture could not be copied in.
    #[error("{owner}: fixture `{fixture}`: {source}")]
    Fixture {
        /// Whose fixture (`role `detach``, `` `[kit]` ``, `destructive probe 1`, ...).
        owner: String,
        /// The fixture as the profile names it.
        fixture: String,
        /// Why it failed.
        #[source]
        source: SandboxError,
    },
    /// The kit profile's directory could not be copied into the sandbox.
    #[error("copying the kit profile's directory into the sandbox: {0}")]
    ProfileDir(#[source] SandboxError),
    /// A setup line could not be run at all.
    #[error("{owner} setup: {source}")]
    SetupRun {
        /// Whose setup.
        owner: String,
        /// Why it could not run.
        #[source]
        source: SandboxError,
    },
    /// A setup line ran and failed.
    #[error("{owner}: setup command `{line}` failed ({ended}): {stderr}")]
    SetupFailed {
        /// Whose setup.
        owner: String,
        /// The line.
        line: String,
        /// How it ended (the driver's words).
        ended: String,
        /// The end of its stderr, trimmed.
        stderr: String,
    },
}

/// A prepared sandbox, registered for clean-up should conform be interrupted; it derefs to
/// the sandbox.
pub struct Prepared {
    sandbox: Sandbox,
    _registration: Registration,
}

impl Prepared {
    /// Ends the sandbox ([`Sandbox::close`]); it stays registered for an interruption until
    /// its directory is gone.
    pub fn close(self) -> Result<(), crate::sandbox::Left> {
        let Prepared { sandbox, _registration } = self;
        sandbox.close()
    }
}

impl std::ops::Deref for Prepared {
    type Target = Sandbox;
    fn deref(&self) -> &Sandbox {
        &self.sandbox
    }
}

/// Fixtures and setup lines of one owner (a role, the kit, one probe).
struct Part<'p> {
    owner: String,
    fixtures: &'p [String],
    setup: &'p [String],
    env: Vec<(String, String)>,
}

/// A sandbox for `needs`: `[tool] env`, then the roles' fixtures and setup, then the kit's;
/// `keep` keeps its directory afterwards.
pub fn prepare(
    tool: &Tool,
    profile: &Profile,
    needs: &Needs<'_>,
    keep: bool,
) -> Result<Prepared, PrepareError> {
    interrupt::gate()?;
    let mut sandbox = Sandbox::new().map_err(PrepareError::Sandbox)?;
    if keep {
        sandbox.keep();
    }
    let registration =
        Registration::new(sandbox.marker(), (!keep).then(|| sandbox.root().to_path_buf()));
    for (k, v) in render_env(&profile.file.tool.env, sandbox.root(), &sandbox.work()) {
        sandbox.set_env(k, v);
    }
    let prepared = Prepared { sandbox, _registration: registration };
    if profile.file.kit.copy_profile_dir {
        prepared
            .copy_dir_contents(&profile.base_dir(), PROFILE_DIR_LIMIT)
            .map_err(PrepareError::ProfileDir)?;
    }
    let setup_program = tool.setup_program(prepared.root()).map_err(|source| {
        PrepareError::SetupProgram { path: prepared.root().join("conform-tool"), source }
    })?;
    let roles = role_parts(profile, needs.roles, &prepared);
    install(&prepared, profile, &roles, &setup_program)?;
    install(&prepared, profile, &kit_parts(profile, needs), &setup_program)?;
    Ok(prepared)
}

fn role_parts<'p>(profile: &'p Profile, roles: &[&str], sandbox: &Sandbox) -> Vec<Part<'p>> {
    roles
        .iter()
        .filter_map(|name| {
            let role = profile.role(name)?;
            Some(Part {
                owner: format!("role `{name}`"),
                fixtures: &role.fixtures,
                setup: &role.setup,
                // Setup sees the role's environment too (a pacing knob, a database path).
                env: render_env(&role.env, sandbox.root(), &sandbox.work()),
            })
        })
        .collect()
}

/// The kit's fixtures and setup, then each destructive probe's when destructive probes run,
/// each stream probe's when stream probes run, and `[kit.argument_order]`'s when it is used.
fn kit_parts<'p>(profile: &'p Profile, needs: &Needs<'_>) -> Vec<Part<'p>> {
    // The manifest command and `--help` need nothing of the kit's.
    let kit_probes = needs.probes.iter().any(|k| !k.always_there());
    if !kit_probes && !needs.argument_order {
        return Vec::new();
    }
    let kit = &profile.file.kit;
    let part = |owner: String, fixtures: &'p [String], setup: &'p [String]| Part {
        owner,
        fixtures,
        setup,
        env: Vec::new(),
    };
    let mut parts = vec![part("`[kit]`".to_owned(), &kit.fixtures, &kit.setup)];
    if needs.probes.iter().any(|k| k.runs_destructive()) {
        for (n, probe) in kit.destructive.iter().enumerate() {
            parts.push(part(format!("destructive probe {}", n + 1), &probe.fixtures, &probe.setup));
        }
    }
    if needs.probes.iter().any(|k| matches!(k, ProbeKind::Stream | ProbeKind::StreamSignal)) {
        for (n, probe) in kit.stream.iter().enumerate() {
            parts.push(part(format!("stream probe {}", n + 1), &probe.fixtures, &probe.setup));
        }
    }
    if needs.argument_order
        && let Some(order) = &kit.argument_order
    {
        parts.push(part("`[kit.argument_order]`".to_owned(), &order.fixtures, &order.setup));
    }
    parts
}

/// Every part's fixtures, then every part's setup lines, in order.
fn install(
    sandbox: &Sandbox,
    profile: &Profile,
    parts: &[Part<'_>],
    setup_program: &Path,
) -> Result<(), PrepareError> {
    for part in parts {
        for fixture in part.fixtures {
            let source = profile.fixture_path(fixture);
            let dest = Path::new(fixture).file_name().map(PathBuf::from).unwrap_or_default();
            sandbox.copy_in(&source, &dest).map_err(|source| PrepareError::Fixture {
                owner: part.owner.clone(),
                fixture: fixture.clone(),
                source,
            })?;
        }
    }
    for part in parts {
        let mut env: Vec<(OsString, OsString)> = vec![
            (TOOL_ENV.into(), setup_program.as_os_str().to_owned()),
            (SANDBOX_DIR_ENV.into(), sandbox.root().as_os_str().to_owned()),
        ];
        env.extend(part.env.iter().map(|(k, v)| (k.into(), v.into())));
        for line in part.setup {
            interrupt::gate()?;
            match sandbox.run_setup_with(line, &env, SETUP_LIMIT) {
                Ok(_) => {}
                Err(SandboxError::SetupFailed { termination, stderr_tail, .. }) => {
                    return Err(PrepareError::SetupFailed {
                        owner: part.owner.clone(),
                        line: line.clone(),
                        ended: format!("{termination:?}"),
                        stderr: stderr_tail.trim().to_owned(),
                    });
                }
                Err(source) => {
                    return Err(PrepareError::SetupRun { owner: part.owner.clone(), source });
                }
            }
        }
    }
    Ok(())
}
