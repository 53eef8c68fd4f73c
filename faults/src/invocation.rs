//! What a fault knows of an invocation before it runs: the command it names (parsed by
//! reftool's own parser), its options and words in argv, its instance and state directory.

use std::ffi::OsString;
use std::io::IsTerminal;

use reftool::framework::cli::{self, Early, Parsed};
use reftool::framework::registry::{CommandSpec, ValueType};
use reftool::framework::state::{DEFAULT_INSTANCE, StateConfig};
use reftool::framework::{App, OutputMode};
use reftool::runtime::ids::JobId;

/// The options of the framework that take a value, wherever they appear.
const GLOBAL_VALUE_OPTIONS: &[&str] = &["output", "timeout", "instance-id"];

/// An invocation as reftool would parse it.
pub struct Call<'a> {
    /// The application it runs in.
    pub app: &'a App,
    /// argv as invoked.
    pub argv: Vec<OsString>,
    /// reftool's parse of it.
    pub parsed: Result<Parsed, Early>,
    /// The command it names, when it parses.
    pub spec: Option<&'a CommandSpec>,
    /// The command its first words name, parsed or not (its options' values are told apart
    /// from words by it).
    pub named: Option<&'a CommandSpec>,
    /// The output mode it answers in.
    pub mode: OutputMode,
    /// Whether stdin is a terminal (the call is interactive).
    pub interactive: bool,
}

impl<'a> Call<'a> {
    /// Parses `argv` with `app`'s parser.
    pub fn parse(app: &'a App, argv: &[OsString]) -> Call<'a> {
        let command = cli::build(app.registry(), app.name(), app.version(), app.about());
        let parsed = cli::parse(command, app.registry(), argv);
        let spec = parsed.as_ref().ok().and_then(|p| app.registry().get(&p.path));
        let named = spec.or_else(|| named_command(app, argv));
        Call {
            app,
            argv: argv.to_vec(),
            parsed,
            spec,
            named,
            mode: reftool::framework::Modes::detect(argv).output,
            interactive: std::io::stdin().is_terminal(),
        }
    }

    /// The command path, when argv names a command.
    pub fn path(&self) -> Option<&str> {
        self.parsed.as_ref().ok().map(|p| p.path.as_str())
    }

    /// Whether argv names the command at `path` (and parses).
    pub fn is(&self, path: &str) -> bool {
        self.path() == Some(path)
    }

    /// Whether the first words of argv name the command at `path`, parsed or not.
    pub fn names(&self, path: &str) -> bool {
        self.named.is_some_and(|s| s.path == path)
    }

    /// Whether the command declares an interruption.
    pub fn interruptible(&self) -> bool {
        self.spec.is_some_and(|s| s.interruption.is_some())
    }

    /// Whether the call has a budget (an interruptible command, or `job wait`).
    pub fn has_budget(&self) -> bool {
        self.spec.is_some_and(|s| s.interruption.is_some() || s.takes_budget)
    }

    /// Whether the parser refused argv (an ARG_ERROR before anything is validated).
    pub fn refused(&self) -> bool {
        matches!(self.parsed, Err(Early::Invalid { .. }))
    }

    /// Whether this call streams (`--stream`).
    pub fn streams(&self) -> bool {
        self.parsed.as_ref().is_ok_and(|p| p.stream)
    }

    /// The instance the call runs under (flag, else environment, else the default).
    pub fn instance(&self) -> String {
        self.parsed
            .as_ref()
            .ok()
            .and_then(|p| p.instance_id.clone())
            .unwrap_or_else(|| DEFAULT_INSTANCE.to_owned())
    }

    /// The call's state directory and instance.
    pub fn state(&self) -> Option<StateConfig> {
        StateConfig::from_env(self.instance()).ok()
    }

    /// The `ID` of a `job` built-in, when it is a job id.
    pub fn job_id(&self) -> Option<JobId> {
        let parsed = self.parsed.as_ref().ok()?;
        parsed.path.starts_with("job.").then_some(())?;
        JobId::parse(parsed.args.text("id")?).ok()
    }

    /// The long options of the command that take a value, the framework's included.
    pub fn value_options(&self) -> Vec<String> {
        let mut names: Vec<String> = GLOBAL_VALUE_OPTIONS.iter().map(|s| (*s).to_owned()).collect();
        if let Some(spec) = self.named {
            names.extend(
                spec.flags
                    .iter()
                    .filter(|f| f.value_type != ValueType::Boolean)
                    .map(|f| f.name.clone()),
            );
        }
        names
    }

    /// argv's options and words.
    pub fn args(&self) -> Vec<Arg> {
        args(&self.argv, &self.value_options())
    }
}

/// The command the first words of `argv` name (the longest registered path they begin with).
fn named_command<'a>(app: &'a App, argv: &[OsString]) -> Option<&'a CommandSpec> {
    let globals: Vec<String> = GLOBAL_VALUE_OPTIONS.iter().map(|s| (*s).to_owned()).collect();
    let words: Vec<String> = args(argv, &globals)
        .iter()
        .filter_map(|a| match a {
            Arg::Word { index } => argv[*index].to_str().map(str::to_owned),
            _ => None,
        })
        .collect();
    (1..=words.len()).rev().find_map(|n| app.registry().get(&words[..n].join(".")))
}

/// One element of argv after `argv[0]`: an option (with its value) or a word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// `--name value` (at `index` and `index + 1`), `--name=value` or a switch, at `index`.
    Option {
        /// Long name without `--`.
        name: String,
        /// Its value, when it takes one.
        value: Option<String>,
        /// Where it starts in argv.
        index: usize,
        /// Whether the value is written `--name=value` (one element).
        inline: bool,
    },
    /// A command word or a positional, at `index`.
    Word {
        /// Where it is in argv.
        index: usize,
    },
    /// `--`, at `index`: what follows are words.
    Separator {
        /// Where it is in argv.
        index: usize,
    },
}

impl Arg {
    /// Where it starts in argv.
    pub fn index(&self) -> usize {
        match self {
            Arg::Option { index, .. } | Arg::Word { index } | Arg::Separator { index } => *index,
        }
    }

    /// How many elements of argv it spans.
    pub fn span(&self) -> usize {
        match self {
            Arg::Option { value: Some(_), inline: false, .. } => 2,
            _ => 1,
        }
    }

    /// The name and value of an option that has a value.
    pub fn named_value(&self) -> Option<(&str, &str)> {
        match self {
            Arg::Option { name, value: Some(value), .. } => Some((name, value)),
            _ => None,
        }
    }

    /// The value of an option that has one.
    pub fn value(&self) -> Option<&str> {
        self.named_value().map(|(_, value)| value)
    }

    /// Whether it is the option `name`.
    pub fn is_option(&self, wanted: &str) -> bool {
        matches!(self, Arg::Option { name, .. } if name == wanted)
    }
}

/// The options and words of `argv` (after `argv[0]`): `value_options` take the next element
/// as their value unless written `--x=v`.
pub fn args(argv: &[OsString], value_options: &[String]) -> Vec<Arg> {
    let mut out = Vec::new();
    let mut index = 1;
    let mut after_separator = false;
    while index < argv.len() {
        let text = argv[index].to_str();
        match text {
            Some("--") if !after_separator => {
                after_separator = true;
                out.push(Arg::Separator { index });
            }
            Some(arg) if !after_separator && arg.starts_with("--") && arg.len() > 2 => {
                let body = &arg[2..];
                let (name, inline) = match body.split_once('=') {
                    Some((name, value)) => (name, Some(value.to_owned())),
                    None => (body, None),
                };
                let takes_value = value_options.iter().any(|v| v == name);
                let start = index;
                let (value, is_inline) = match (inline, takes_value) {
                    (Some(value), _) => (Some(value), true),
                    (None, true) => {
                        index += 1;
                        (argv.get(index).map(|v| v.to_string_lossy().into_owned()), false)
                    }
                    (None, false) => (None, false),
                };
                out.push(Arg::Option {
                    name: name.to_owned(),
                    value,
                    index: start,
                    inline: is_inline,
                });
            }
            _ => out.push(Arg::Word { index }),
        }
        index += 1;
    }
    out
}

/// The argv index of the first word after `path_words` command words: the first positional.
pub fn first_positional(args: &[Arg], path_words: usize) -> Option<usize> {
    args.iter()
        .filter_map(|a| match a {
            Arg::Word { index } => Some(*index),
            _ => None,
        })
        .nth(path_words)
}

/// `argv` without the elements of `dropped`.
pub fn without(argv: &[OsString], dropped: &[&Arg]) -> Vec<OsString> {
    let gone: Vec<usize> = dropped.iter().flat_map(|a| a.index()..a.index() + a.span()).collect();
    argv.iter().enumerate().filter(|(i, _)| !gone.contains(i)).map(|(_, a)| a.clone()).collect()
}

/// Where an option added to `argv` goes: before any `--`, else at the end.
fn insertion_point(argv: &[OsString], value_options: &[String]) -> usize {
    args(argv, value_options)
        .iter()
        .find_map(|a| match a {
            Arg::Separator { index } => Some(*index),
            _ => None,
        })
        .unwrap_or(argv.len())
}

/// `argv` with `--name value` added before any `--` (or at the end).
pub fn with_option(
    argv: &[OsString],
    value_options: &[String],
    name: &str,
    value: &str,
) -> Vec<OsString> {
    let at = insertion_point(argv, value_options);
    let mut out = argv.to_vec();
    out.splice(at..at, [OsString::from(format!("--{name}")), OsString::from(value)]);
    out
}

/// `argv` with the switch `--name` added before any `--` (or at the end).
pub fn with_switch(argv: &[OsString], value_options: &[String], name: &str) -> Vec<OsString> {
    let at = insertion_point(argv, value_options);
    let mut out = argv.to_vec();
    out.insert(at, OsString::from(format!("--{name}")));
    out
}

/// `argv` with every value of the option `name` set to `value`.
pub fn with_value(
    argv: &[OsString],
    value_options: &[String],
    name: &str,
    value: &str,
) -> Vec<OsString> {
    let mut out = argv.to_vec();
    for arg in args(argv, value_options) {
        if let Arg::Option { name: n, value: Some(_), index, inline } = arg
            && n == name
        {
            if inline {
                out[index] = OsString::from(format!("--{name}={value}"));
            } else {
                out[index + 1] = OsString::from(value);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("tool").chain(args.iter().copied()).map(OsString::from).collect()
    }

    fn values() -> Vec<String> {
        vec!["output".into(), "limit".into(), "budget".into()]
    }

    #[test]
    fn the_first_positional_skips_option_values() {
        let a = args(&argv(&["--output", "json", "files", "--limit", "3", "site"]), &values());
        assert_eq!(first_positional(&a, 0), Some(3));
        assert_eq!(first_positional(&a, 1), Some(6));
        let a = args(&argv(&["files", "--limit", "3"]), &values());
        assert_eq!(first_positional(&a, 1), None);
    }

    #[test]
    fn options_are_added_changed_and_dropped_in_either_spelling() {
        let v = argv(&["analyze", "x", "--budget=1s", "--", "--budget", "y"]);
        let changed = with_value(&v, &values(), "budget", "5");
        assert_eq!(changed, argv(&["analyze", "x", "--budget=5", "--", "--budget", "y"]));
        let added = with_option(&argv(&["analyze", "x", "--", "z"]), &values(), "budget", "9");
        assert_eq!(added, argv(&["analyze", "x", "--budget", "9", "--", "z"]));
        let v = argv(&["analyze", "--budget", "0", "x"]);
        let a = args(&v, &values());
        let budget: Vec<&Arg> = a.iter().filter(|a| a.is_option("budget")).collect();
        assert_eq!(without(&v, &budget), argv(&["analyze", "x"]));
    }
}
