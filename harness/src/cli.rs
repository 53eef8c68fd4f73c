//! The command line: `conform run | matrix | list | explain | init | manual | completions`.
//!
//! Parsing is clap's; everything after parsing is a function returning conform's exit code
//! ([`crate::exit`]). A bad invocation, an unreadable or invalid profile, a filter that matches
//! nothing or a report file that cannot be created is `ARG_ERROR` (2) and nothing runs; with
//! `--format json` the error is one spec envelope on stdout, otherwise a message on stderr.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::{CommandFactory, Parser, Subcommand, ValueEnum};
use serde_json::{Value, json};

use crate::baseline::Baseline;
use crate::catalogue::Catalogue;
use crate::event::{Event, EventStream, RunInfo};
use crate::exit;
use crate::levels::Unselected;
use crate::outcome::{ScenarioResult, Status, millis};
use crate::pace::{Gate, Pace};
use crate::plan;
use crate::profile::{DEFAULT_PROFILE, Profile};
use crate::redact::Redactor;
use crate::report::{self, Format, ReportOptions, SPEC_VERSION};
use crate::run::Engine;
use crate::scenario::{Declaration, SCENARIO_FILES, Scenario};
use crate::snapshot::SnapshotStore;
use crate::summary::{RunFacts, RunSummary};

pub mod campaign;
pub mod explain;
pub mod manual;

/// What `conform --version` prints: conform's version and the version of the spec it judges,
/// since a verdict means something only against a known spec.
pub fn version_text() -> String {
    format!(
        "conform {} (judges the CLI Agent Spec, schema version {SPEC_VERSION})",
        env!("CARGO_PKG_VERSION")
    )
}

/// Where `conform --help` points for the rest of the manual.
const AFTER_HELP: &str = "The manual (the profile and scenario formats, the checks, the \
    redaction rules, how a run goes): `conform manual` lists its topics, `conform manual \
    profile` prints one. The same text is conform's crate docs.";

/// The bounds of the pace of a run given no `-j` ([`crate::pace`]): at least one scenario
/// per core at once, and at most, once the manifest command's start-up (`startup`) is
/// measured, eight per core, at least 64 and at most 96 for a tool that starts fast, two per
/// core, at least 4 and at most 16, for one that takes [`SLOW_STARTUP`] or more to answer (an
/// interpreter, a framework that loads much). Between the two, the pace decides as the run
/// goes, from the tool's CPU per call and how much the machine stretches its processes.
///
/// A scenario mostly waits: on the tool's pacing, on budgets running out, on jobs ending, so
/// a run's wall time falls with the number at once until it nears its longest scenario.
/// Measured by `scripts/bench-jobs.py` over reftool's 91 scenarios on a shared two-core
/// machine, whose longest scenario alone takes 7.0 s: -j 1 186 s, -j 16 15 s, -j 32 11-15 s,
/// -j 64 8.8-9.8 s in ten runs; past that (-j 96: 10 s) the scenarios only stretch each other.
/// That ceiling holds only for a tool whose calls cost the CPU almost nothing: the same 64 at
/// once against a Python implementation (a 50 ms start-up of CPU) put the two cores at a load
/// of 28 and failed 17 to 25 scenarios of a correct tool, which is why the pace starts from
/// the tool's own cost and backs off when its processes wait for the CPU.
pub fn pace_bounds(startup: std::time::Duration) -> crate::pace::Bounds {
    let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    let ceiling = if startup >= SLOW_STARTUP {
        cores.saturating_mul(2).clamp(4, 16)
    } else {
        cores.saturating_mul(8).clamp(64, 96)
    };
    crate::pace::Bounds { floor: cores, ceiling }
}

/// A start-up from which the pace's ceiling is the slow tool's ([`pace_bounds`]).
pub const SLOW_STARTUP: std::time::Duration = std::time::Duration::from_millis(250);

/// conform: the conformance suite for CLI tools that AI agents call.
#[derive(Debug, Parser)]
#[command(name = "conform", version, about, after_help = AFTER_HELP)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// The subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the scenarios against a tool and report per criterion.
    Run(RunArgs),
    /// Run (or read the reports of) several implementations and write one page comparing
    /// them, with a page for each (`conform manual matrix`).
    Matrix {
        /// The matrix file: the implementations, each a tool with its profile or a JSON report.
        matrix: PathBuf,
        /// Write the pages into this directory (`index.html`, one page and one JSON report per
        /// implementation).
        #[arg(long, value_name = "DIR")]
        html: PathBuf,
    },
    /// Run a seeded fault campaign: many random schedules of kills, signals, budgets and
    /// races, invariants checked after each, a failure shrunk and replayable (`conform manual
    /// campaign`).
    Campaign(campaign::CampaignCommand),
    /// List the scenario catalogue.
    List {
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
        format: OutputFormat,
    },
    /// Show one scenario as conform runs it: per step the argv, each variable's formula (and,
    /// given a tool, its value) and the checks that judge it.
    Explain {
        /// The scenario id (see `conform list`).
        scenario_id: String,
        /// The tool: its manifest is discovered and the scenario's role calibrated as `run`
        /// does, so that each variable shows its value (this runs the tool).
        tool: Option<OsString>,
        /// The profile, with a tool (default: ./conform.toml when it exists).
        #[arg(long, value_name = "FILE", requires = "tool")]
        profile: Option<PathBuf>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
        format: OutputFormat,
    },
    /// Draft a commented profile (conform.toml) from the tool's manifest.
    Init {
        /// The tool: a path, or a name looked up in PATH.
        tool: OsString,
        /// Write the draft here (refused if the file exists) instead of stdout.
        #[arg(long, value_name = "FILE")]
        output: Option<PathBuf>,
    },
    /// Print a part of conform's manual (without TOPIC: the list of topics).
    Manual {
        /// The topic, e.g. `profile`, `scenarios`, `checks`.
        topic: Option<String>,
        /// Output format.
        #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
        format: OutputFormat,
    },
    /// Print a shell completion script.
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `conform run`.
#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The tool under test: a path, or a name looked up in PATH (default: the profile's
    /// `[tool] command`).
    pub tool: Option<OsString>,
    /// The profile (default: ./conform.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Run only scenarios with this id, requirement or tag (repeatable).
    #[arg(long, value_name = "ID")]
    pub only: Vec<String>,
    /// Skip scenarios with this id, requirement or tag (repeatable).
    #[arg(long, value_name = "ID")]
    pub skip: Vec<String>,
    /// Scenarios run at once (by default eight per core, at least 64, at most 96; for a tool
    /// whose manifest command takes 250 ms or more, two per core, at least 4, at most 16).
    ///
    /// Scenarios mostly wait on the tool (its pacing, budgets, jobs), not on the CPU, so
    /// several at once shorten a run towards its longest scenario; see `conform manual
    /// running`. `-j 1` runs them one by one, in catalogue order. A slow-starting tool under a
    /// short kit `timeout_seconds` on a loaded machine may need a lower `-j`.
    #[arg(short = 'j', long = "jobs", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=256))]
    pub jobs: Option<u16>,
    /// The report on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// Which records of the JSON report keep the tool's output (its stdout document, its
    /// stderr): `failures`, those of every scenario that did not pass (a passing scenario's
    /// records keep their repro, ending and times), or `all`.
    #[arg(long, value_enum, value_name = "WHICH", default_value_t = crate::report::json::Evidence::Failures)]
    pub evidence: crate::report::json::Evidence,
    /// Also write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
    /// Also write a Markdown summary here (for CI step summaries).
    #[arg(long = "summary-md", value_name = "FILE")]
    pub summary_md: Option<PathBuf>,
    /// Also write one self-contained HTML page here: the failures first, every scenario's
    /// timeline, the evidence folded (`conform manual running`).
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
    /// List every scenario in the report (under its requirement, and under its skip reason)
    /// and every skipped one in the progress lines.
    #[arg(short = 'v', long)]
    pub verbose: bool,
    /// Compare each step's normalized response with the snapshots in DIR.
    #[arg(long, value_name = "DIR")]
    pub snapshots: Option<PathBuf>,
    /// Rewrite the snapshots instead of comparing.
    #[arg(long, requires = "snapshots")]
    pub update: bool,
    /// Expected failures, each with a reason.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Also run the scenario files under DIR (`<REQ>/<id>.toml`), e.g. the failures a
    /// campaign kept (`conform campaign --save-failures DIR`).
    #[arg(long, value_name = "DIR")]
    pub scenarios: Option<PathBuf>,
    /// Keep each scenario's sandbox directory (their paths go to stderr).
    #[arg(long)]
    pub keep_sandboxes: bool,
    /// Count a failed `should` scenario against conformance too (exit 80), for a strict CI
    /// gate; the profile's `[gate] strict = true` says the same. The spec's level claims stay
    /// as the spec judges them.
    #[arg(long)]
    pub strict: bool,
    /// Accept `must` scenarios that were not judged for a reason the profile can fix (a role
    /// it lacks that the manifest could fill, a role with too little work): exit 0 instead of
    /// 82 UNJUDGED, the report still listing them. The profile's `[gate] allow_unjudged =
    /// true` says the same.
    #[arg(long)]
    pub allow_unjudged: bool,
}

/// `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum OutputFormat {
    /// For people.
    Human,
    /// One JSON envelope on stdout.
    Json,
}

/// A bad invocation: message for people, and whether JSON was asked for.
struct ArgError {
    message: String,
    json: bool,
}

impl ArgError {
    fn new(message: impl Into<String>, format: OutputFormat) -> Self {
        ArgError { message: message.into(), json: format == OutputFormat::Json }
    }
}

/// Parses `args` (program name first) and runs; returns conform's exit code.
pub fn main_with(args: impl IntoIterator<Item = OsString>) -> u8 {
    let started = Instant::now();
    let args: Vec<OsString> = args.into_iter().collect();
    let cli = match Cli::try_parse_from(&args) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if e.kind() == ErrorKind::DisplayVersion {
                write_stdout(&format!("{}\n", version_text()));
                return exit::SUCCESS;
            }
            if e.kind() == ErrorKind::DisplayHelp {
                let _ = e.print();
                return exit::SUCCESS;
            }
            let json = wants_json(&args);
            let message = e.render().to_string();
            return arg_error(&ArgError { message: message.trim().to_owned(), json }, started);
        }
    };
    let result = match cli.command {
        Command::Run(run) => run_command(&run, started),
        Command::Matrix { matrix, html } => matrix_command(&matrix, &html),
        Command::Campaign(cmd) => campaign::command(&cmd),
        Command::List { format } => list(format),
        Command::Explain { scenario_id, tool, profile, format } => {
            explain(&scenario_id, tool.as_ref(), profile, format)
        }
        Command::Init { tool, output } => init(&tool, output.as_deref()),
        Command::Manual { topic, format } => manual(topic.as_deref(), format, started),
        Command::Completions { shell } => {
            let mut cmd = Cli::command();
            clap_complete::generate(shell, &mut cmd, "conform", &mut std::io::stdout().lock());
            Ok(exit::SUCCESS)
        }
    };
    match result {
        Ok(code) => code,
        Err(e) => arg_error(&e, started),
    }
}

/// Whether the raw arguments ask for `--format json` (used when clap itself failed).
fn wants_json(args: &[OsString]) -> bool {
    args.windows(2).any(|w| w[0] == "--format" && w[1] == "json")
        || args.iter().any(|a| a == "--format=json")
}

fn arg_error(e: &ArgError, started: Instant) -> u8 {
    if e.json {
        let envelope = crate::report::json::error_envelope(
            "ARG_ERROR",
            &e.message,
            exit::ARG_ERROR,
            millis(started.elapsed()),
        );
        write_stdout(&format!("{envelope}\n"));
    } else {
        // A message may quote what a tool printed or a path it made: shown inert.
        eprintln!("conform: {}", crate::inert::text(&e.message));
    }
    exit::ARG_ERROR
}

fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

fn success_envelope(data: Value, started: Instant) -> String {
    let envelope = crate::report::json::success_envelope(data, millis(started.elapsed()));
    format!("{envelope}\n")
}

/// The embedded catalogue; a broken one is a fault of this build.
fn catalogue() -> Result<Catalogue, ArgError> {
    Catalogue::embedded().map_err(|errors| ArgError {
        message: format!(
            "the scenario catalogue of this build is broken:\n{}",
            errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("\n")
        ),
        json: false,
    })
}

/// Finds the tool: a path must exist; a bare name must be in PATH.
fn resolve_tool(tool: &OsString) -> Result<PathBuf, String> {
    let path = Path::new(tool);
    if path.components().count() > 1 || path.is_absolute() {
        let resolved = std::fs::canonicalize(path)
            .map_err(|e| format!("tool `{}` cannot be used: {e}", path.display()))?;
        return if is_executable(&resolved) {
            Ok(resolved)
        } else {
            Err(format!("tool `{}` is not an executable file", path.display()))
        };
    }
    let search = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&search)
        .map(|dir| dir.join(path))
        .find(|candidate| is_executable(candidate))
        .ok_or_else(|| format!("tool `{}` is not a file and is not found in PATH", path.display()))
}

/// The tool and leading arguments of the profile's `[tool] command`, for a run given no TOOL:
/// a first element holding `/` is relative to the profile's directory, a bare one is looked up
/// in PATH.
fn profile_command(profile: &Profile) -> Result<(PathBuf, Vec<String>), String> {
    let Some((program, rest)) =
        profile.file.tool.command.as_deref().and_then(<[String]>::split_first)
    else {
        return Err(match &profile.path {
            Some(path) => format!(
                "no TOOL given and the profile {} has no `[tool] command`: name the tool (conform run TOOL)",
                path.display()
            ),
            None => "no TOOL given and no profile (conform.toml) with a `[tool] command`: name the tool (conform run TOOL)".to_owned(),
        });
    };
    let tool = if program.contains('/') {
        let path = profile.base_dir().join(program);
        resolve_tool(&path.into_os_string())
            .map_err(|e| format!("the profile's `[tool] command`: {e}"))?
    } else {
        resolve_tool(&OsString::from(program))
            .map_err(|e| format!("the profile's `[tool] command`: {e}"))?
    };
    Ok((tool, rest.to_vec()))
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

fn load_profile(profile: Option<&Path>) -> Result<Profile, String> {
    match profile {
        Some(path) => Profile::load(path).map_err(|e| format!("invalid profile: {e}")),
        None => {
            let default = Path::new(DEFAULT_PROFILE);
            if default.exists() {
                Profile::load(default).map_err(|e| format!("invalid profile: {e}"))
            } else {
                Ok(Profile::none())
            }
        }
    }
}

fn run_command(args: &RunArgs, started: Instant) -> Result<u8, ArgError> {
    let fail = |m: String| ArgError::new(m, args.format);
    let profile = load_profile(args.profile.as_deref()).map_err(fail)?;
    let (tool, leading_args) = match &args.tool {
        Some(tool) => (resolve_tool(tool).map_err(fail)?, Vec::new()),
        None => profile_command(&profile).map_err(fail)?,
    };
    let mut catalogue = catalogue()?;
    if let Some(dir) = &args.scenarios {
        campaign::add_scenarios(&mut catalogue, dir).map_err(fail)?;
    }
    let planned = plan::plan(&catalogue, &args.only, &args.skip, &profile)
        .map_err(|e| fail(e.to_string()))?;
    let options = ReportOptions {
        format: match args.format {
            OutputFormat::Human => Format::Human,
            OutputFormat::Json => Format::Json,
        },
        junit: args.junit.clone(),
        summary_md: args.summary_md.clone(),
        progress: true,
        evidence: args.evidence,
        verbose: args.verbose,
        html: args.html.clone(),
    };
    let baseline = match &args.baseline {
        Some(path) => {
            let b = Baseline::load(path).map_err(|e| fail(e.to_string()))?;
            b.check_known(catalogue.scenarios.iter().map(|s| s.id.as_str()), path)
                .map_err(|e| fail(e.to_string()))?;
            Some(b)
        }
        None => None,
    };
    let snapshots = match &args.snapshots {
        Some(dir) => Some(SnapshotStore::open(dir, args.update).map_err(|e| fail(e.to_string()))?),
        None => None,
    };
    let reporters = report::reporters(&options).map_err(|e| fail(e.to_string()))?;
    // What conform itself writes during the run is not the tool's write outside its sandbox.
    for own in [&args.junit, &args.summary_md, &args.html, &args.snapshots].into_iter().flatten() {
        crate::sandbox::ignore_outside(own);
    }

    if let Err(e) = crate::interrupt::install() {
        eprintln!("conform: warning: {e}; an interrupted run may leave processes behind");
    }
    let strict = args.strict || profile.file.gate.strict;
    let subject_tool = crate::tool::Tool { path: tool.clone(), leading_args };
    let engine = Engine::for_tool(subject_tool, profile, args.keep_sandboxes);
    let stream = EventStream::start(reporters);
    let events = stream.sender();
    // `-j N`: N at once. Otherwise the pace decides, from what the run measures.
    let (workers, gate) = match args.jobs {
        Some(n) => (usize::from(n), Gate::Open),
        None => {
            let bounds = pace_bounds(engine.subject.startup);
            (bounds.ceiling, Gate::Paced(Pace::new(engine.discovery.cpu_per_call, bounds)))
        }
    };
    let sampling = match &gate {
        Gate::Paced(pace) => pace.start_sampling().ok(),
        Gate::Open => None,
    };
    events.send(Event::RunStarted(RunInfo {
        tool: tool.display().to_string(),
        spec_version: SPEC_VERSION.to_owned(),
        scenario_count: planned.len(),
        jobs: workers,
        paced_from: match &gate {
            Gate::Paced(pace) => Some(pace.limit()),
            Gate::Open => None,
        },
    }));
    let finish = |result: &mut ScenarioResult, root: Option<&Path>| {
        if let Some(store) = &snapshots {
            // Where the tool and conform run differs per machine: snapshots say `[TOOL]`,
            // `[CWD]`, `[HOME]` instead (see `redact`).
            let invoked = args.tool.as_deref().map_or_else(|| tool.clone(), PathBuf::from);
            let mut redactor = Redactor::new().with_tool(invoked, &tool).with_host();
            if let Some(root) = root {
                redactor = redactor.with_sandbox_root(root);
            }
            if let Err(e) = store.apply(result, &redactor) {
                result.status = Status::Error { message: e.to_string() };
            }
        }
        if let Some(baseline) = &baseline {
            baseline.apply(result);
        }
    };
    let results = engine.run_plan(&planned, workers, &gate, &events, &finish);
    let pace = match &gate {
        Gate::Paced(pace) => Some(pace.stop()),
        Gate::Open => None,
    };
    if let Some(thread) = sampling {
        let _ = thread.join();
    }
    // Orphans no single scenario could be charged with (`-j` without cgroups): killed now,
    // and said, since no scenario's findings can hold them.
    for leak in crate::sandbox::end_of_run() {
        eprintln!(
            "conform: process {} of the tool outlived every scenario (found {:?}; killed now): {}",
            leak.pid,
            leak.found_by,
            crate::inert::line(&leak.cmdline.join(" "))
        );
    }
    // Sandboxes whose removal ran out of descriptors (a low `ulimit -n`), tried again now.
    for left in crate::sandbox::remove_left_sandboxes() {
        eprintln!(
            "conform: failed to remove a sandbox ({}); the next conform run removes it",
            crate::inert::line(&left.to_string())
        );
    }
    // Interrupted: the watcher has stopped the tool's processes; the report still comes, with
    // what finished, marked partial, before conform exits 130.
    let interrupted = crate::interrupt::wait_for_clean_up();
    let planned_ids: BTreeSet<&str> = planned.iter().map(|p| p.scenario.id.as_str()).collect();
    let unselected: Vec<Unselected> = catalogue
        .scenarios
        .iter()
        .filter(|s| !planned_ids.contains(s.id.as_str()))
        .map(|s| Unselected {
            id: s.id.clone(),
            requirement: s.requirement.clone(),
            level: s.level,
        })
        .collect();
    let facts = RunFacts {
        unselected: &unselected,
        baseline_in_use: baseline.is_some(),
        duration_ms: millis(started.elapsed()),
        interrupted,
        interruption_declared: engine.declares(Declaration::Interruption),
        strict,
        pace: pace.as_ref(),
        allow_unjudged: args.allow_unjudged || engine.subject.profile.file.gate.allow_unjudged,
        role_fills: &engine.role_fills,
    };
    let summary = RunSummary::compute(&results, &facts);
    let code = summary.exit_code;
    events.send(Event::RunFinished(summary));
    drop(events);
    let reported = stream.finish();
    crate::interrupt::reported();
    if let Err(e) = reported {
        eprintln!("conform: {e}");
        return Ok(exit::GENERAL_ERROR);
    }
    Ok(code)
}

fn matrix_command(matrix: &Path, dir: &Path) -> Result<u8, ArgError> {
    let fail = |e: crate::matrix::MatrixError| ArgError::new(e.to_string(), OutputFormat::Human);
    let loaded = crate::matrix::Matrix::load(matrix).map_err(fail)?;
    let conform = crate::matrix::this_conform().map_err(fail)?;
    let mut log = std::io::stderr();
    match crate::matrix::build(&loaded, dir, &conform, &mut log) {
        Ok(code) => Ok(code),
        Err(e) => {
            eprintln!("conform: {}", crate::inert::text(&e.to_string()));
            Ok(exit::GENERAL_ERROR)
        }
    }
}

fn init(tool_arg: &OsString, output: Option<&Path>) -> Result<u8, ArgError> {
    let fail = |m: String| ArgError::new(m, OutputFormat::Human);
    let tool = resolve_tool(tool_arg).map_err(fail)?;
    if let Some(path) = output
        && path.exists()
    {
        return Err(fail(format!(
            "{} exists; conform init never overwrites a profile",
            path.display()
        )));
    }
    // A tool without a usable manifest is a bad subject for `init`, like a bad argument: say
    // what the manifest command did (hung, failed, printed no JSON) and change nothing.
    let discovered = crate::discover::discover(
        &crate::tool::Tool::new(tool.clone()),
        &crate::profile::Profile::default(),
    );
    let manifest = match discovered.result {
        Ok(d) => d.response,
        Err(why) => {
            return Err(fail(format!(
                "`{} manifest` gave no manifest to draft a profile from: {why}",
                tool.display()
            )));
        }
    };
    // A bare name stays one (looked up in PATH wherever the profile is used); a path is
    // written as resolved.
    let given = tool_arg.to_string_lossy();
    let name = if given.contains('/') { tool.display().to_string() } else { given.into_owned() };
    // The draft quotes the manifest's command names: no control character of them is kept.
    let text = crate::inert::text(&crate::init::skeleton(&name, &manifest)).into_owned();
    match output {
        Some(path) => std::fs::write(path, &text)
            .map_err(|e| fail(format!("failed to write {}: {e}", path.display())))?,
        None => write_stdout(&text),
    }
    Ok(exit::SUCCESS)
}

fn list(format: OutputFormat) -> Result<u8, ArgError> {
    let started = Instant::now();
    let catalogue = catalogue()?;
    match format {
        OutputFormat::Json => {
            let scenarios: Vec<Value> = catalogue.scenarios.iter().map(summary_json).collect();
            write_stdout(&success_envelope(json!({ "scenarios": scenarios }), started));
        }
        OutputFormat::Human => write_stdout(&list_table(&catalogue)),
    }
    Ok(exit::SUCCESS)
}

fn summary_json(s: &Scenario) -> Value {
    json!({
        "id": s.id,
        "requirement": s.requirement,
        "criterion": s.criterion,
        "level": s.level,
        "roles": s.roles,
        "probes": s.probe_kinds().iter().map(|k| k.as_str()).collect::<Vec<_>>(),
        "tags": s.tags,
    })
}

/// What a scenario needs from the profile: its roles and kit probes (`-` for nothing).
fn needs(s: &Scenario) -> String {
    let mut parts: Vec<String> = s.roles.clone();
    parts.extend(s.probe_kinds().iter().map(|k| format!("kit:{}", k.as_str())));
    if !s.placements().is_empty() {
        parts.push("kit:argument_order".to_owned());
    }
    if parts.is_empty() { "-".into() } else { parts.join(",") }
}

/// The catalogue as a plain table: id, requirement, level, roles, criterion.
pub fn list_table(catalogue: &Catalogue) -> String {
    let rows: Vec<[String; 5]> = catalogue
        .scenarios
        .iter()
        .map(|s| {
            [
                s.id.clone(),
                s.requirement.clone(),
                s.level.to_string(),
                needs(s),
                s.criterion.clone(),
            ]
        })
        .collect();
    let header = ["ID", "REQUIREMENT", "LEVEL", "ROLES", "CRITERION"].map(str::to_owned);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row.iter()) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter().zip(row.iter()) {
            out.push_str(cell);
            out.push_str(&" ".repeat(w - cell.chars().count() + 2));
        }
        out.push_str(&row[4]);
        out.push('\n');
    }
    out.push_str(&format!("{} scenarios\n", rows.len()));
    out
}

fn explain(
    id: &str,
    tool: Option<&OsString>,
    profile: Option<PathBuf>,
    format: OutputFormat,
) -> Result<u8, ArgError> {
    let started = Instant::now();
    let catalogue = catalogue()?;
    let Some(s) = catalogue.get(id) else {
        let close: Vec<&str> = catalogue
            .scenarios
            .iter()
            .map(|s| s.id.as_str())
            .filter(|other| other.contains(id) || id.contains(*other))
            .take(5)
            .collect();
        let hint = if close.is_empty() {
            " (see `conform list`)".to_owned()
        } else {
            format!(" (did you mean: {}?)", close.join(", "))
        };
        return Err(ArgError::new(format!("no scenario `{id}`{hint}"), format));
    };
    let (rel, source) = SCENARIO_FILES
        .iter()
        .find(|(rel, _)| rel.ends_with(&format!("/{id}.toml")))
        .copied()
        .unwrap_or_default();
    // Given a tool, its values are measured as `run` measures them.
    let engine = match tool {
        Some(tool) => {
            let fail = |m: String| ArgError::new(m, format);
            let profile = load_profile(profile.as_deref()).map_err(fail)?;
            let tool = crate::tool::Tool::new(resolve_tool(tool).map_err(fail)?);
            Some(Engine::for_tool(tool, profile, false))
        }
        None => None,
    };
    let calibration = engine.as_ref().and_then(|e| explain::calibrate_for(&e.subject, s));
    let measured = engine.as_ref().map(|e| explain::Measured { subject: &e.subject, calibration });
    let explanation = explain::explain(s, rel, source, measured.as_ref());
    match format {
        OutputFormat::Json => {
            let data = serde_json::to_value(&explanation).unwrap_or_default();
            write_stdout(&success_envelope(data, started));
        }
        OutputFormat::Human => write_stdout(&explain::human(&explanation)),
    }
    Ok(exit::SUCCESS)
}

fn manual(topic: Option<&str>, format: OutputFormat, started: Instant) -> Result<u8, ArgError> {
    let topics = || -> Vec<Value> {
        manual::TOPICS.iter().map(|t| json!({ "name": t.name, "summary": t.summary })).collect()
    };
    let Some(name) = topic else {
        match format {
            OutputFormat::Json => {
                write_stdout(&success_envelope(json!({ "topics": topics() }), started));
            }
            OutputFormat::Human => write_stdout(&manual::topic_list()),
        }
        return Ok(exit::SUCCESS);
    };
    let Some(found) = manual::topic(name) else {
        return Err(ArgError::new(
            format!("no manual topic `{name}`\n{}", manual::topic_list().trim_end()),
            format,
        ));
    };
    let text = manual::plain(found.text);
    match format {
        OutputFormat::Json => {
            let data = json!({ "topic": found.name, "summary": found.summary, "text": text });
            write_stdout(&success_envelope(data, started));
        }
        OutputFormat::Human => write_stdout(&text),
    }
    Ok(exit::SUCCESS)
}
