//! `conform campaign`, `conform campaign merge`, and `conform run --scenarios DIR` (the scenario
//! files a campaign keeps). The campaign itself is [`crate::campaign`].

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::campaign::{self, Options, report};
use crate::catalogue::Catalogue;
use crate::exit;
use crate::scenario::Scenario;

use super::{ArgError, OutputFormat};

/// `conform campaign`: seeded fault campaigns (`conform manual campaign`).
#[derive(Debug, clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct CampaignCommand {
    /// `merge`.
    #[command(subcommand)]
    pub sub: Option<CampaignSub>,
    /// The campaign's options.
    #[command(flatten)]
    pub args: CampaignArgs,
}

/// What `conform campaign` does besides running one.
#[derive(Debug, clap::Subcommand)]
pub enum CampaignSub {
    /// Merge the JSON reports of a partitioned campaign (`--partition k/n`) into one.
    Merge {
        /// The JSON reports (`conform campaign ... --format json > part-k.json`).
        #[arg(required = true)]
        reports: Vec<PathBuf>,
        /// The merged report on stdout.
        #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
        format: OutputFormat,
        /// Also write a JUnit XML report here.
        #[arg(long, value_name = "FILE")]
        junit: Option<PathBuf>,
    },
}

/// `conform campaign TOOL --profile conform.toml ...`.
#[derive(Debug, clap::Args)]
pub struct CampaignArgs {
    /// The tool under test: a path, or a name looked up in PATH (default: the profile's
    /// `[tool] command`).
    pub tool: Option<OsString>,
    /// The profile (default: ./conform.toml when it exists).
    #[arg(long, value_name = "FILE")]
    pub profile: Option<PathBuf>,
    /// Stop after this many trials (alone: no time limit). With --replay or --trial: run the
    /// one schedule at most this many times (default 20), stopping at its first violation.
    #[arg(long, value_name = "N")]
    pub trials: Option<u64>,
    /// Stop starting trials after this many minutes (default 2.5 when --trials is not given).
    #[arg(long, value_name = "M")]
    pub minutes: Option<f64>,
    /// The seed of every schedule (default: drawn, and printed for the replay).
    #[arg(long, value_name = "S")]
    pub seed: Option<u64>,
    /// Run only trial T of the seed (a replay: `--seed S --trial T`), until it fails, at most
    /// 20 times (--trials).
    #[arg(long, value_name = "T", requires = "seed")]
    pub trial: Option<u64>,
    /// Replay the schedule in FILE (a kept failure's `.json`, or a campaign's JSON report,
    /// whose first failure's minimal schedule runs).
    #[arg(long, value_name = "FILE", conflicts_with = "trial")]
    pub replay: Option<PathBuf>,
    /// Trials at once (default 4).
    #[arg(short = 'j', long = "jobs", value_name = "N",
          value_parser = clap::value_parser!(u16).range(1..=64))]
    pub jobs: Option<u16>,
    /// Run only the k-th of n shares of the trials (each CI job with the same seed), then
    /// `conform campaign merge` their JSON reports.
    #[arg(long, value_name = "K/N", value_parser = parse_partition)]
    pub partition: Option<(u64, u64)>,
    /// Go on after the first confirmed violation.
    #[arg(long)]
    pub keep_going: bool,
    /// Report a failing trial as it is, without shrinking it.
    #[arg(long)]
    pub no_shrink: bool,
    /// Interrupt only this role (repeatable; default: every campaign role the profile names).
    #[arg(long, value_name = "ROLE")]
    pub role: Vec<String>,
    /// Keep each minimal failure as a scenario file under DIR (`DIR/<REQ>/<id>.toml`, run it
    /// with `conform run TOOL --profile P --scenarios DIR --only <id>`) and its schedule
    /// (`DIR/<id>.json`, for `--replay`).
    #[arg(long, value_name = "DIR")]
    pub save_failures: Option<PathBuf>,
    /// The report on stdout.
    #[arg(long, value_enum, default_value_t = OutputFormat::Human)]
    pub format: OutputFormat,
    /// Also write a JUnit XML report here.
    #[arg(long, value_name = "FILE")]
    pub junit: Option<PathBuf>,
}

fn parse_partition(text: &str) -> Result<(u64, u64), String> {
    let (k, n) = text.split_once('/').ok_or("a partition is K/N, e.g. 2/4")?;
    let k: u64 = k.trim().parse().map_err(|_| format!("`{k}` is no number"))?;
    let n: u64 = n.trim().parse().map_err(|_| format!("`{n}` is no number"))?;
    if n == 0 || k == 0 || k > n {
        return Err(format!("partition {k}/{n}: K must be 1 to N"));
    }
    Ok((k, n))
}

fn write_stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// Runs `conform campaign`.
pub(super) fn command(cmd: &CampaignCommand) -> Result<u8, ArgError> {
    match &cmd.sub {
        Some(CampaignSub::Merge { reports, format, junit }) => {
            merge(reports, *format, junit.as_deref())
        }
        None => run(&cmd.args),
    }
}

fn merge(paths: &[PathBuf], format: OutputFormat, junit: Option<&Path>) -> Result<u8, ArgError> {
    let fail = |m: String| ArgError::new(m, format);
    let mut reports = Vec::new();
    for path in paths {
        let text = std::fs::read_to_string(path)
            .map_err(|e| fail(format!("failed to read {}: {e}", path.display())))?;
        reports.push(
            report::parse_report(&text).map_err(|e| fail(format!("{}: {e}", path.display())))?,
        );
    }
    let merged = report::merge(&reports).map_err(fail)?;
    emit(&merged, format, junit)
}

fn emit(
    report: &campaign::CampaignReport,
    format: OutputFormat,
    junit: Option<&Path>,
) -> Result<u8, ArgError> {
    if let Some(path) = junit {
        let xml = report::junit(report).map_err(|e| ArgError::new(e, format))?;
        std::fs::write(path, xml).map_err(|e| {
            ArgError::new(format!("failed to write {}: {e}", path.display()), format)
        })?;
    }
    match format {
        OutputFormat::Json => write_stdout(&format!("{}\n", report::envelope(report))),
        OutputFormat::Human => write_stdout(&report::human(report)),
    }
    Ok(report::summarize(report).exit_code)
}

fn run(args: &CampaignArgs) -> Result<u8, ArgError> {
    let fail = |m: String| ArgError::new(m, args.format);
    let profile = match &args.profile {
        Some(path) => crate::profile::Profile::load(path)
            .map_err(|e| fail(format!("invalid profile: {e}")))?,
        None => {
            let default = Path::new(crate::profile::DEFAULT_PROFILE);
            if default.exists() {
                crate::profile::Profile::load(default)
                    .map_err(|e| fail(format!("invalid profile: {e}")))?
            } else {
                return Err(fail(
                    "a campaign needs a profile naming the roles to interrupt (--profile FILE)"
                        .into(),
                ));
            }
        }
    };
    let (tool, leading_args) = match &args.tool {
        Some(tool) => (super::resolve_tool(tool).map_err(fail)?, Vec::new()),
        None => super::profile_command(&profile).map_err(fail)?,
    };
    if let Some(m) = args.minutes
        && !(m > 0.0 && m.is_finite())
    {
        return Err(fail(format!("--minutes {m}: give a positive number")));
    }
    let replay = match &args.replay {
        Some(path) => Some(campaign::read_schedule(path).map_err(fail)?),
        None => None,
    };
    let seed = args.seed.unwrap_or_else(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        campaign::schedule::Rng::for_trial(nanos, u64::from(std::process::id())).next_u64()
            % 1_000_000
    });
    let duration = match (args.minutes, args.trials) {
        (Some(m), _) => Duration::from_secs_f64(m * 60.0),
        (None, Some(_)) => Duration::from_secs(24 * 3600),
        (None, None) => campaign::default_duration(),
    };
    let jobs = args.jobs.map_or(campaign::DEFAULT_JOBS, usize::from);
    if let Some(dir) = &args.save_failures {
        std::fs::create_dir_all(dir)
            .map_err(|e| fail(format!("failed to create {}: {e}", dir.display())))?;
        crate::sandbox::ignore_outside(dir);
    }
    let mut line = vec!["conform".to_owned(), "campaign".to_owned()];
    line.push(crate::outcome::shell_quote(
        &args
            .tool
            .as_ref()
            .map_or_else(|| tool.display().to_string(), |t| t.to_string_lossy().into_owned()),
    ));
    if let Some(p) = &args.profile {
        line.extend([
            "--profile".to_owned(),
            crate::outcome::shell_quote(&p.display().to_string()),
        ]);
    }
    for r in &args.role {
        line.extend(["--role".to_owned(), crate::outcome::shell_quote(r)]);
    }
    let command = line.join(" ");
    let options = Options {
        seed,
        trials: args.trials,
        duration,
        jobs,
        partition: args.partition,
        keep_going: args.keep_going,
        shrink: !args.no_shrink,
        roles: args.role.clone(),
        trial: args.trial,
        replay,
        save_failures: args.save_failures.clone(),
        progress: true,
    };
    if let Err(e) = crate::interrupt::install() {
        eprintln!("conform: warning: {e}; an interrupted campaign may leave processes behind");
    }
    eprintln!(
        "conform campaign: seed {seed}, {jobs} trial(s) at once (replay one with --seed {seed} --trial T)"
    );
    let subject = crate::tool::Tool { path: tool.clone(), leading_args };
    let engine = crate::run::Engine::for_tool(subject, profile, false);
    let ran = campaign::run(&engine, &options, &tool.display().to_string(), &command);
    for leak in crate::sandbox::end_of_run() {
        eprintln!(
            "conform: process {} of the tool outlived every trial (killed now): {}",
            leak.pid,
            crate::inert::line(&leak.cmdline.join(" "))
        );
    }
    let _ = crate::sandbox::remove_left_sandboxes();
    let interrupted = crate::interrupt::wait_for_clean_up();
    let code = match ran {
        Ok(mut report) => {
            report.interrupted |= interrupted;
            emit(&report, args.format, args.junit.as_deref())
        }
        Err(e) => {
            eprintln!("conform: {}", crate::inert::text(&e));
            Ok(exit::GENERAL_ERROR)
        }
    };
    crate::interrupt::reported();
    code
}

/// The scenario files under `dir` (`<REQ>/<id>.toml`, as `--save-failures` writes them) added
/// to the catalogue (`conform run --scenarios DIR`).
pub fn add_scenarios(catalogue: &mut Catalogue, dir: &Path) -> Result<(), String> {
    let mut found: Vec<Scenario> = Vec::new();
    let entries =
        std::fs::read_dir(dir).map_err(|e| format!("failed to read {}: {e}", dir.display()))?;
    let mut files: Vec<(String, PathBuf)> = Vec::new();
    for entry in entries.flatten() {
        let req = entry.path();
        if !req.is_dir() {
            continue;
        }
        let Some(req_name) = req.file_name().map(|n| n.to_string_lossy().into_owned()) else {
            continue;
        };
        for file in std::fs::read_dir(&req)
            .map_err(|e| format!("failed to read {}: {e}", req.display()))?
            .flatten()
        {
            let path = file.path();
            if path.extension().is_some_and(|x| x == "toml") {
                let name =
                    path.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
                files.push((format!("{req_name}/{name}"), path));
            }
        }
    }
    files.sort();
    for (rel, path) in files {
        let text = std::fs::read_to_string(&path)
            .map_err(|e| format!("failed to read {}: {e}", path.display()))?;
        let scenario = crate::catalogue::parse_scenario(&rel, &text).map_err(|e| e.to_string())?;
        if catalogue.get(&scenario.id).is_some() || found.iter().any(|s| s.id == scenario.id) {
            return Err(format!("{}: scenario id `{}` is used twice", path.display(), scenario.id));
        }
        found.push(scenario);
    }
    if found.is_empty() {
        return Err(format!("{} holds no scenario file (<REQ>/<id>.toml)", dir.display()));
    }
    catalogue.scenarios.extend(found);
    Ok(())
}
