//! What clap cannot say about where and how often options appear (REQ-F-067, REQ-F-079).
//!
//! clap is set to let a repeated option override itself, so `--output json ... --output json`
//! parses; this module then reads argv (up to `--`) once more, as a list of [`Token`]s, and
//! refuses a scalar option given twice with *different* values: ARG_ERROR 2
//! `CONFLICTING_OPTION`, naming the option, nothing done. The same value twice is accepted,
//! and a switch (`--stream`) may be repeated freely. Both spellings count, `--x v` and `--x=v`.

use std::collections::BTreeMap;
use std::ffi::OsString;

use super::failure::Failure;
use super::registry::{CommandSpec, ValueType};

/// The framework's global options that take a value.
pub const GLOBAL_VALUE_OPTIONS: &[&str] = &["output", "timeout", "instance-id"];

/// One element of argv as the scan sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// `--name value`, `--name=value` or a switch `--name` (value `None`).
    Option {
        /// Long name without `--`.
        name: String,
        /// The value, for an option that takes one.
        value: Option<String>,
    },
    /// A command word or a positional.
    Word,
}

/// The long options of `spec` that take a value, the framework's globals included.
pub fn value_options(spec: &CommandSpec) -> Vec<String> {
    let mut names: Vec<String> = GLOBAL_VALUE_OPTIONS.iter().map(|s| (*s).to_owned()).collect();
    names.extend(
        spec.flags.iter().filter(|f| f.value_type != ValueType::Boolean).map(|f| f.name.clone()),
    );
    names
}

/// Splits argv (without `argv[0]`) into tokens; `value_options` are the long options whose
/// next element (unless written `--x=v`) is their value. Everything after `--` is a word.
pub fn tokens(argv: &[OsString], value_options: &[String]) -> Vec<Token> {
    let mut out = Vec::new();
    let mut index = 1;
    let mut after_separator = false;
    while index < argv.len() {
        let text = argv[index].to_str();
        match text {
            Some("--") if !after_separator => after_separator = true,
            Some(arg) if !after_separator && arg.starts_with("--") && arg.len() > 2 => {
                let body = &arg[2..];
                let (name, inline) = match body.split_once('=') {
                    Some((name, value)) => (name, Some(value.to_owned())),
                    None => (body, None),
                };
                let takes_value = value_options.iter().any(|v| v == name);
                let value = match (inline, takes_value) {
                    (Some(value), _) => Some(value),
                    (None, true) => {
                        index += 1;
                        argv.get(index).map(|v| v.to_string_lossy().into_owned())
                    }
                    (None, false) => None,
                };
                out.push(Token::Option { name: name.to_owned(), value });
            }
            _ => out.push(Token::Word),
        }
        index += 1;
    }
    out
}

/// Refuses a value option given more than once with different values.
pub fn check_repeats(tokens: &[Token]) -> Result<(), Failure> {
    first_conflict(tokens).map_or(Ok(()), Err)
}

/// The refusal of the first value option given twice with different values, if any.
fn first_conflict(tokens: &[Token]) -> Option<Failure> {
    let (name, first, value) =
        repeats(tokens).into_iter().find(|(_, first, value)| first != value)?;
    Some(
        Failure::arg(
            "CONFLICTING_OPTION",
            format!("--{name} is given twice with different values ({first:?} and {value:?})"),
        )
        .context(serde_json::json!({"option": format!("--{name}"), "values": [first, value]}))
        .suggestion(format!("give --{name} once")),
    )
}

/// Every repeat of a value option, in order: its name, its first value and the repeated one.
pub fn repeats(tokens: &[Token]) -> Vec<(&str, &str, &str)> {
    let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
    let mut found = Vec::new();
    for token in tokens {
        let Token::Option { name, value: Some(value), .. } = token else { continue };
        match seen.get(name.as_str()) {
            None => {
                seen.insert(name, value);
            }
            Some(first) => found.push((name.as_str(), *first, value.as_str())),
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(args: &[&str]) -> Vec<OsString> {
        std::iter::once("tool").chain(args.iter().copied()).map(OsString::from).collect()
    }

    fn values() -> Vec<String> {
        vec!["output".into(), "limit".into()]
    }

    #[test]
    fn both_spellings_are_one_option() {
        let t = tokens(&argv(&["--output", "json", "files", "--output=text"]), &values());
        assert!(check_repeats(&t).unwrap_err().message.contains("--output"));
        let t = tokens(&argv(&["--output=json", "files", "--output", "json"]), &values());
        assert!(check_repeats(&t).is_ok());
    }

    #[test]
    fn switches_and_words_after_the_separator_are_not_options() {
        let t = tokens(&argv(&["files", "--stream", "--stream", "--", "--limit", "x"]), &values());
        assert!(check_repeats(&t).is_ok());
        let stream = Token::Option { name: "stream".into(), value: None };
        assert_eq!(t, [Token::Word, stream.clone(), stream, Token::Word, Token::Word]);
    }

    #[test]
    fn an_option_value_is_no_word() {
        let t = tokens(&argv(&["--output", "json", "files", "--limit", "3", "site"]), &values());
        assert_eq!(t.iter().filter(|t| **t == Token::Word).count(), 2);
    }
}
