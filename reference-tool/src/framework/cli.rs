//! Argument parsing with clap, built from the registrations.
//!
//! Every registered path becomes a (nested) subcommand: `job.wait` is `reftool job wait`. The
//! global options are accepted in any position, and mean the same wherever they appear. A
//! scalar option may be repeated with the same value; with different values it is ARG_ERROR 2
//! `CONFLICTING_OPTION` ([`super::options`]). A parse failure of any kind (unknown command,
//! unknown flag, missing or malformed value, non-UTF-8 text) becomes ARG_ERROR 2 in the
//! validation phase, with clap's "did you mean" as `error.suggestion` when it has one.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{Arg, ArgAction, ArgMatches, Command};

use super::context::{ArgValue, Args};
use super::failure::Failure;
use super::options;
use super::registry::{CommandSpec, FlagOwner, Registry, ValueType};

/// What a successful parse yields.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    /// The command path.
    pub path: String,
    /// The command's own arguments.
    pub args: Args,
    /// `--timeout` as given.
    pub timeout: Option<String>,
    /// `--instance-id` (or `REFTOOL_INSTANCE_ID`) as given.
    pub instance_id: Option<String>,
    /// `--budget` as given (interruptible commands only).
    pub budget: Option<String>,
    /// `--idempotency-key` as given (writers only).
    pub idempotency_key: Option<String>,
    /// `--stream` (commands that declare `supports_streaming` only).
    pub stream: bool,
}

/// What the parser decided instead of a command to run.
#[derive(Debug, Clone, PartialEq)]
pub enum Early {
    /// Help was asked for: this text, exit 0.
    Help(String),
    /// `--version` was asked for.
    Version,
    /// The invocation is invalid; `usage` goes to stderr.
    Invalid {
        /// The ARG_ERROR.
        failure: Box<Failure>,
        /// clap's full rendering, for a person reading stderr.
        usage: String,
    },
}

fn leaf_command(spec: &CommandSpec, name: &str) -> Command {
    let mut cmd =
        Command::new(name.to_owned()).about(spec.description.clone()).args_override_self(true);
    for flag in &spec.flags {
        let mut arg =
            Arg::new(flag.name.clone()).long(flag.name.clone()).help(flag.description.clone());
        arg = match flag.value_type {
            ValueType::Boolean => arg.action(ArgAction::SetTrue),
            ValueType::Integer => arg
                .value_name("N")
                .allow_negative_numbers(true)
                .value_parser(clap::value_parser!(i64)),
            ValueType::String => arg.value_name("VALUE").value_parser(clap::value_parser!(String)),
        };
        // The framework resolves the env of its own flags itself (a malformed
        // AGENT_CALL_BUDGET_MS is a warning, not an error); command flags let clap read it.
        if let (Some(var), FlagOwner::Command) = (&flag.env, flag.owner) {
            arg = arg.env(var.clone());
        }
        if flag.name == "budget" {
            arg = arg.allow_hyphen_values(true);
        }
        cmd = cmd.arg(arg.required(flag.required));
    }
    for (index, positional) in spec.positionals.iter().enumerate() {
        let arg = Arg::new(positional.name.clone())
            .index(index + 1)
            .required(positional.required)
            .help(positional.description.clone())
            .value_parser(match positional.value_type {
                ValueType::Integer => clap::value_parser!(i64).into(),
                _ => clap::value_parser!(String),
            });
        cmd = cmd.arg(arg);
    }
    cmd
}

fn insert(parent: Command, words: &[&str], spec: &CommandSpec) -> Command {
    let Some((first, rest)) = words.split_first() else { return parent };
    if rest.is_empty() {
        return parent.subcommand(leaf_command(spec, first));
    }
    let exists = parent.get_subcommands().any(|c| c.get_name() == *first);
    let group = if exists {
        parent.find_subcommand(first).cloned().unwrap_or_else(|| Command::new(first.to_string()))
    } else {
        Command::new(first.to_string())
            .subcommand_required(true)
            .arg_required_else_help(true)
            .args_override_self(true)
    };
    let group = insert(group, rest, spec);
    if exists { parent.mut_subcommand(first, |_| group) } else { parent.subcommand(group) }
}

/// The clap command of the whole tool.
pub fn build(registry: &Registry, name: &str, version: &str, about: &str) -> Command {
    let mut root = Command::new(name.to_owned())
        .version(version.to_owned())
        .about(about.to_owned())
        .subcommand_required(true)
        .arg_required_else_help(true)
        .disable_help_subcommand(true)
        .args_override_self(true)
        .arg(
            Arg::new("output")
                .long("output")
                .global(true)
                .value_name("FORMAT")
                .help("Response format: json or text")
                .value_parser(["json", "text"]),
        )
        .arg(
            Arg::new("timeout")
                .long("timeout")
                .global(true)
                .value_name("DURATION")
                .allow_hyphen_values(true)
                .help("Wall-clock limit: 5s, 2000ms, 1m or milliseconds; 0 turns it off")
                .value_parser(clap::value_parser!(String)),
        )
        .arg(
            Arg::new("instance-id")
                .long("instance-id")
                .global(true)
                .value_name("ID")
                .env("REFTOOL_INSTANCE_ID")
                .help("Instance whose state and jobs this call uses")
                .value_parser(clap::value_parser!(String)),
        );
    for spec in registry.commands() {
        if spec.path.starts_with("__") {
            continue;
        }
        let words = spec.words();
        root = insert(root, &words, spec);
    }
    root
}

fn suggestion_of(error: &clap::Error, tool: &str) -> String {
    let mut suggestions = Vec::new();
    for kind in [ContextKind::SuggestedSubcommand, ContextKind::SuggestedArg] {
        match error.get(kind) {
            Some(ContextValue::String(s)) => suggestions.push(s.clone()),
            Some(ContextValue::Strings(list)) => suggestions.extend(list.iter().cloned()),
            _ => {}
        }
    }
    if let Some(first) = suggestions.first() {
        format!("did you mean '{first}'? Run '{tool} manifest' for every command and flag")
    } else {
        format!("run '{tool} --help' or '{tool} manifest' for every command and flag")
    }
}

fn code_of(kind: ErrorKind) -> &'static str {
    match kind {
        ErrorKind::InvalidSubcommand => "UNKNOWN_COMMAND",
        ErrorKind::UnknownArgument => "UNKNOWN_FLAG",
        ErrorKind::MissingRequiredArgument => "MISSING_ARGUMENT",
        ErrorKind::MissingSubcommand | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => {
            "MISSING_COMMAND"
        }
        ErrorKind::InvalidValue | ErrorKind::ValueValidation | ErrorKind::NoEquals => {
            "INVALID_VALUE"
        }
        ErrorKind::InvalidUtf8 => "INVALID_UTF8",
        _ => "INVALID_ARGUMENTS",
    }
}

/// Parses argv against `command`.
pub fn parse(command: Command, registry: &Registry, argv: &[OsString]) -> Result<Parsed, Early> {
    let tool = command.get_name().to_owned();
    let matches = match command.try_get_matches_from(argv.iter()) {
        Ok(matches) => matches,
        Err(error) => {
            return Err(match error.kind() {
                ErrorKind::DisplayHelp => Early::Help(error.render().to_string()),
                ErrorKind::DisplayVersion => Early::Version,
                kind => {
                    let rendered = error.render().to_string();
                    let first = rendered.lines().next().unwrap_or("invalid arguments");
                    let message = if matches!(
                        kind,
                        ErrorKind::MissingSubcommand
                            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
                    ) {
                        "no command given".to_owned()
                    } else {
                        first.trim_start_matches("error: ").trim().to_owned()
                    };
                    // `--stream` on a command that cannot stream (REQ-O-004) says so.
                    let stream_refused = kind == ErrorKind::UnknownArgument
                        && matches!(
                            error.get(ContextKind::InvalidArg),
                            Some(ContextValue::String(arg)) if arg == "--stream"
                        );
                    let failure = if stream_refused {
                        Failure::arg(
                            "STREAMING_NOT_SUPPORTED",
                            "this command does not support --stream",
                        )
                        .suggestion(format!(
                            "drop --stream; '{tool} manifest' marks the commands that stream \
                             (supports_streaming)"
                        ))
                    } else {
                        Failure::arg(code_of(kind), message)
                            .suggestion(suggestion_of(&error, &tool))
                    };
                    Early::Invalid { failure: Box::new(failure), usage: rendered }
                }
            });
        }
    };
    let mut words = Vec::new();
    let mut leaf: &ArgMatches = &matches;
    while let Some((name, sub)) = leaf.subcommand() {
        words.push(name.to_owned());
        leaf = sub;
    }
    let path = words.join(".");
    let Some(spec) = registry.get(&path) else {
        let failure = Failure::arg("UNKNOWN_COMMAND", format!("unknown command {path:?}"));
        return Err(Early::Invalid { failure: Box::new(failure), usage: String::new() });
    };
    let invalid =
        |failure: Failure| Early::Invalid { failure: Box::new(failure), usage: String::new() };
    let tokens = options::tokens(argv, &options::value_options(spec));
    options::check_repeats(&tokens).map_err(invalid)?;
    let text = |name: &str| leaf.get_one::<String>(name).cloned();
    let mut args = Args::default();
    for flag in spec.flags.iter().filter(|f| f.owner == FlagOwner::Command) {
        let value = match flag.value_type {
            ValueType::Boolean => Some(ArgValue::Switch(leaf.get_flag(&flag.name))),
            ValueType::Integer => {
                leaf.get_one::<i64>(&flag.name).map(|n| ArgValue::Text(n.to_string()))
            }
            ValueType::String => text(&flag.name).map(ArgValue::Text),
        };
        if let Some(value) = value {
            args.values.insert(flag.name.clone(), value);
        }
    }
    for positional in &spec.positionals {
        let value = match positional.value_type {
            ValueType::Integer => leaf.get_one::<i64>(&positional.name).map(|n| n.to_string()),
            _ => text(&positional.name),
        };
        if let Some(value) = value {
            args.values.insert(positional.name.clone(), ArgValue::Text(value));
        }
    }
    let owned = |name: &str| {
        if spec.flags.iter().any(|f| f.name == name) { text(name) } else { None }
    };
    let parsed = Parsed {
        path,
        args,
        timeout: text("timeout"),
        instance_id: text("instance-id"),
        budget: owned("budget"),
        idempotency_key: owned("idempotency-key"),
        stream: spec.flags.iter().any(|f| f.name == "stream") && leaf.get_flag("stream"),
    };
    Ok(parsed)
}
