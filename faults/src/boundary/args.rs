//! Faults in what goes in: argv rewritten before reftool parses it, or a call refused (or
//! answered) before it runs.

use std::ffi::OsString;

use reftool::duration::parse_duration;
use reftool::framework::budget::{BUDGET_ENV, DEFAULT_BUDGET_MS};
use reftool::framework::exit::Exit;
use reftool::framework::registry::{DEFAULT_TIMEOUT_MS, FlagOwner};
use reftool::framework::state::DEFAULT_INSTANCE;
use reftool::framework::{Answer, Failure, Response};
use reftool::runtime::jobs::{JobOutcome, JobStatus};
use serde_json::json;

use crate::Fault;
use crate::invocation::{
    Arg, Call, first_positional, with_option, with_switch, with_value, without,
};
use crate::jobs::{Jobs, delivered, named_job};

/// argv as `fault` makes it.
pub fn rewrite(fault: Fault, call: &Call<'_>, argv: Vec<OsString>) -> Vec<OsString> {
    let values = call.value_options();
    let args = call.args();
    let options = |name: &str| -> Vec<&Arg> { args.iter().filter(|a| a.is_option(name)).collect() };
    let budget_given = !options("budget").is_empty();
    // The budget the variable gives (`Some(None)`: set but malformed).
    let env = std::env::var(BUDGET_ENV).ok();
    let env_ms = env.as_deref().map(|v| parse_duration(v).ok().map(reftool::duration::millis));
    let no_flag_piped = call.has_budget() && !budget_given && !call.interactive;
    match fault {
        // The variable's value replaces the flag's.
        Fault::EnvBeatsFlag if call.has_budget() && budget_given => match env_ms {
            Some(Some(ms)) => with_value(&argv, &values, "budget", &ms.to_string()),
            _ => argv,
        },
        Fault::DefaultBudget20s if no_flag_piped && env.is_none() => {
            with_option(&argv, &values, "budget", "20000")
        }
        Fault::EnvBudgetIgnored if no_flag_piped && env.is_some() => {
            with_option(&argv, &values, "budget", &DEFAULT_BUDGET_MS.to_string())
        }
        Fault::ZeroBudgetDefersToEnv if call.has_budget() => {
            let zero: Vec<&Arg> = options("budget")
                .into_iter()
                .filter(|a| a.value().is_some_and(|v| parse_duration(v).is_ok_and(|d| d.is_zero())))
                .collect();
            without(&argv, &zero)
        }
        Fault::BudgetOnTerminal if call.has_budget() && !budget_given && call.interactive => {
            let ms = env_ms.flatten().unwrap_or(DEFAULT_BUDGET_MS);
            with_option(&argv, &values, "budget", &ms.to_string())
        }
        // `s` is read as `ms`: in both flags, and in the variable (which then comes in as the
        // flag, so that no variable has to change).
        Fault::SecondsReadAsMillis => {
            let mut argv = argv;
            for name in ["budget", "timeout"] {
                for arg in options(name) {
                    if let Arg::Option { value: Some(v), .. } = arg
                        && let Some(n) = seconds(v)
                    {
                        argv = with_value(&argv, &values, name, n);
                    }
                }
            }
            match env.as_deref().and_then(seconds) {
                Some(n) if no_flag_piped => with_option(&argv, &values, "budget", n),
                _ => argv,
            }
        }
        Fault::JobTimeoutSpansOneCall if call.interruptible() => {
            without(&argv, &options("timeout"))
        }
        // Only a detaching command's: a resume-only command's continuation is its own
        // invocation, which would then show the added `--timeout 0` to its caller.
        Fault::LifetimeIgnored
            if call.spec.is_some_and(|s| s.interruption.is_some_and(|i| i.detach))
                && options("timeout").is_empty() =>
        {
            with_option(&argv, &values, "timeout", "0")
        }
        Fault::ZeroBudgetIgnoresTimeout
            if call.interruptible()
                && options("budget").iter().any(|a| {
                    a.value().is_some_and(|v| parse_duration(v).is_ok_and(|d| d.is_zero()))
                }) =>
        {
            without(&argv, &options("timeout"))
        }
        Fault::IdentityIgnoresInstance if call.interruptible() => {
            if options("instance-id").is_empty() {
                with_option(&argv, &values, "instance-id", DEFAULT_INSTANCE)
            } else {
                with_value(&argv, &values, "instance-id", DEFAULT_INSTANCE)
            }
        }
        Fault::ForeignInstanceCancel if call.is("job.cancel") => match owning_instance(call) {
            Some(owner) if options("instance-id").is_empty() => {
                with_option(&argv, &values, "instance-id", &owner)
            }
            Some(owner) => with_value(&argv, &values, "instance-id", &owner),
            None => argv,
        },
        // The values before the command path are dropped: the command's default wins.
        Fault::SubcommandDefaultOverridesGlobal => {
            let path = first_positional(&args, 0).unwrap_or(argv.len());
            let before: Vec<&Arg> =
                options("output").into_iter().filter(|a| a.index() < path).collect();
            without(&argv, &before)
        }
        // Of a repeated option only the last value is left (a conflict the parser refuses).
        Fault::ConflictingRepeatLastWins => {
            let mut earlier = Vec::new();
            for (i, arg) in args.iter().enumerate() {
                if let Arg::Option { name, value: Some(_), .. } = arg
                    && args[i + 1..].iter().any(|later| later.is_option(name))
                {
                    earlier.push(arg);
                }
            }
            without(&argv, &earlier)
        }
        // The command's optional options after its first positional are dropped.
        Fault::OptionsStopAtPositional => {
            let Some(spec) = call.spec else { return argv };
            let words = spec.path.split('.').count();
            let Some(positional) = first_positional(&args, words) else { return argv };
            let optional: Vec<&Arg> = args
                .iter()
                .filter(|a| a.index() > positional)
                .filter(|a| {
                    spec.flags.iter().any(|f| {
                        a.is_option(&f.name) && f.owner == FlagOwner::Command && !f.required
                    })
                })
                .collect();
            without(&argv, &optional)
        }
        Fault::DryRunIgnored if call.is("drop-table") => without(&argv, &options("dry-run")),
        Fault::UnconfirmedDrops
            if call.is("drop-table")
                && options("confirm").is_empty()
                && options("yes").is_empty() =>
        {
            with_switch(&argv, &values, "yes")
        }
        // `job wait` without a budget or a `--timeout`: it waits until the job ends.
        Fault::JobWaitBlocks
            if call.is("job.wait")
                && options("budget")
                    .iter()
                    .all(|a| a.value().is_some_and(|v| parse_duration(v).is_ok())) =>
        {
            let argv = without(&argv, &options("timeout"));
            if budget_given {
                with_value(&argv, &values, "budget", "0")
            } else {
                with_option(&argv, &values, "budget", "0")
            }
        }
        // `job status` waits as `job wait` does, with no budget to stop it.
        Fault::JobStatusWaits if call.is("job.status") => {
            let status = first_positional(&args, 1);
            let mut argv = argv;
            if let Some(i) = status {
                argv[i] = OsString::from("wait");
            }
            with_option(&argv, &values, "budget", "0")
        }
        // `migrate` takes a `--budget` (the manifest lists it: `answers`), which changes nothing.
        Fault::BudgetFlagOnPlainCommand if call.names("migrate") => {
            let values = [values, vec!["budget".to_owned()]].concat();
            let args = crate::invocation::args(&argv, &values);
            let budget: Vec<&Arg> = args.iter().filter(|a| a.is_option("budget")).collect();
            without(&argv, &budget)
        }
        _ => argv,
    }
}

/// `N` of a duration `Ns`.
fn seconds(value: &str) -> Option<&str> {
    let digits = value.trim().strip_suffix('s')?;
    (!digits.is_empty() && digits.bytes().all(|b| b.is_ascii_digit())).then_some(digits)
}

/// The instance that owns the job `job cancel` names, whichever it is.
fn owning_instance(call: &Call<'_>) -> Option<String> {
    let id = call.job_id()?;
    let mut jobs = Jobs::open(call)?;
    jobs.conn()
        .query_row("SELECT instance FROM reftool_jobs WHERE job_id = ?1", [id.as_str()], |r| {
            r.get(0)
        })
        .ok()
}

/// The answer `fault` gives instead of running the call, if any.
pub fn refusal(fault: Fault, call: &Call<'_>) -> Option<Answer> {
    call.parsed.as_ref().ok()?;
    let args = call.args();
    let refused = |failure: Failure| Some(answer(call, Response::failure(failure)));
    match fault {
        // The first repeat of an option is refused, even with the same value.
        Fault::SameValueRepeatRefused => {
            let repeated = args.iter().enumerate().find_map(|(i, a)| {
                let option = a.named_value()?;
                args[..i].iter().any(|e| e.named_value() == Some(option)).then_some(option.0)
            })?;
            refused(Failure::arg(
                "CONFLICTING_OPTION",
                format!("--{repeated} cannot be used multiple times"),
            ))
        }
        // `--output` after the first command word is an unknown flag.
        Fault::GlobalOptionAfterPathRefused => {
            let path = first_positional(&args, 0)?;
            args.iter().any(|a| a.is_option("output") && a.index() > path).then_some(())?;
            refused(Failure::arg("UNKNOWN_FLAG", "unexpected argument '--output' found"))
        }
        Fault::AsyncJobWaitRefused if call.is("job.wait") => {
            let view = named_job(call)?;
            let spec = call.app.registry().get(&view.record.command_path)?;
            spec.is_async.then_some(())?;
            refused(Failure::new(
                Exit::PRECONDITION,
                "NOT_A_DETACHED_JOB",
                "job wait serves detached jobs; ask job status",
            ))
        }
        Fault::ResultDeliveredOnce if call.is("job.wait") => {
            let id = call.job_id()?;
            delivered(call, &id).then_some(())?;
            refused(Failure::new(
                Exit::NOT_FOUND,
                "JOB_NOT_FOUND",
                "no such job (its result was delivered)",
            ))
        }
        // The cancel is dropped, and reported done.
        Fault::CancelIgnored if call.is("job.cancel") => {
            let id = call.job_id()?;
            Some(answer(call, cancelled(id.as_str())))
        }
        // A running job is ended `cancelled` in the store; its worker is never told.
        Fault::CancelMarksOnly if call.is("job.cancel") => {
            let id = call.job_id()?;
            let mut jobs = Jobs::open(call)?;
            let view = jobs.peek(&id)?;
            (view.status == JobStatus::Running).then_some(())?;
            let store = jobs.store.clone();
            let instance = jobs.instance.clone();
            store.finish(jobs.conn(), &instance, &id, &JobOutcome::cancelled(&id)).ok()?;
            Some(answer(call, cancelled(id.as_str())))
        }
        _ => None,
    }
}

/// `job cancel`'s answer for a job it cancelled.
fn cancelled(id: &str) -> Response {
    Response::success(json!({"effect": "updated", "job_id": id, "state": "cancelled"}))
}

/// `response` as the call's answer, with the meta every answer of reftool has.
fn answer(call: &Call<'_>, mut response: Response) -> Answer {
    response.timeout_ms = Some(DEFAULT_TIMEOUT_MS);
    if let (Some(failure), Some(spec)) = (&mut response.error, call.spec)
        && failure.retryable.is_none()
    {
        failure.retryable = spec.entry(failure.exit).map(|e| e.retryable);
    }
    Answer::Response { response: Box::new(response), mode: call.mode, usage: String::new() }
}
