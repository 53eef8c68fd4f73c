//! POSIX shell quoting of an argv into one command line (`continue_command`, `cancel_command`).
//!
//! [`quote_argv`] turns an argv (argv\[0\] included) into a line such that `sh -c "$line"` runs
//! exactly that argv, whatever the arguments hold: spaces, quotes, `$`, backticks, globs,
//! newlines, empty strings, a leading `~` or `#`, a first word that looks like an assignment
//! (`A=b`) or a reserved word (`if`).
//!
//! Rules: a word made only of `[A-Za-z0-9_@%+,./:-]` (and `=` after the first word) is left
//! bare; anything else is wrapped in single quotes, each `'` inside written as `'\''`.
//!
//! **Non-UTF-8 bytes.** The line travels in a JSON string, which must be Unicode, so raw bytes
//! cannot be carried. They are quoted instead: each run of invalid bytes becomes
//! `"$(printf '\ooo...')"` (octal escapes are POSIX `printf`; command substitution only strips
//! trailing newlines, and a newline is never an invalid byte). The line stays pure ASCII in
//! that part and still runs the exact bytes. An argument holding NUL cannot occur in an argv.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;

const RESERVED_WORDS: &[&str] = &[
    "!", "{", "}", "case", "do", "done", "elif", "else", "esac", "fi", "for", "if", "in", "then",
    "until", "while", "[[", "]]", "function", "select", "time",
];

fn is_bare_safe(byte: u8, first_word: bool) -> bool {
    byte.is_ascii_alphanumeric()
        || matches!(byte, b'_' | b'@' | b'%' | b'+' | b',' | b'.' | b'/' | b':' | b'-')
        || (byte == b'=' && !first_word)
}

fn single_quote(text: &str, out: &mut String) {
    out.push('\'');
    for c in text.chars() {
        if c == '\'' {
            out.push_str("'\\''");
        } else {
            out.push(c);
        }
    }
    out.push('\'');
}

fn quote_word(arg: &OsStr, first_word: bool, out: &mut String) {
    let bytes = arg.as_bytes();
    if bytes.is_empty() {
        out.push_str("''");
        return;
    }
    if let Ok(text) = std::str::from_utf8(bytes) {
        let bare = bytes.iter().all(|b| is_bare_safe(*b, first_word))
            && !(first_word && RESERVED_WORDS.contains(&text));
        if bare {
            out.push_str(text);
        } else {
            single_quote(text, out);
        }
        return;
    }
    // Mixed valid text and invalid bytes: concatenate quoted pieces into one word.
    let mut rest = bytes;
    while !rest.is_empty() {
        match std::str::from_utf8(rest) {
            Ok(text) => {
                single_quote(text, out);
                rest = &[];
            }
            Err(e) => {
                let (valid, after) = rest.split_at(e.valid_up_to());
                if !valid.is_empty() {
                    // `valid` is UTF-8 by construction of valid_up_to.
                    single_quote(&String::from_utf8_lossy(valid), out);
                }
                let bad_len = e.error_len().unwrap_or(after.len());
                let (bad, tail) = after.split_at(bad_len);
                out.push_str("\"$(printf '");
                for b in bad {
                    out.push_str(&format!("\\{b:03o}"));
                }
                out.push_str("')\"");
                rest = tail;
            }
        }
    }
}

/// Quotes one argument (not in first-word position).
pub fn quote_arg(arg: impl AsRef<OsStr>) -> String {
    let mut out = String::new();
    quote_word(arg.as_ref(), false, &mut out);
    out
}

/// Quotes a whole argv (argv\[0\] included) into one shell command line.
pub fn quote_argv<I, S>(argv: I) -> String
where
    I: IntoIterator<Item = S>,
    S: AsRef<OsStr>,
{
    let mut out = String::new();
    for (i, arg) in argv.into_iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        quote_word(arg.as_ref(), i == 0, &mut out);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;
    use std::os::unix::ffi::OsStringExt;
    use std::process::Command;

    /// Runs `shell -c line` and returns the argv the printer script saw ($0 and $@).
    fn run_line(shell: &str, line: &str) -> Vec<Vec<u8>> {
        let out = Command::new(shell).arg("-c").arg(line).output().unwrap();
        assert!(
            out.status.success(),
            "{shell} -c {line:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let mut parts: Vec<Vec<u8>> = out.stdout.split(|b| *b == 0).map(<[u8]>::to_vec).collect();
        assert_eq!(parts.pop(), Some(Vec::new()), "output ends with NUL");
        parts
    }

    fn printer(dir: &std::path::Path) -> OsString {
        use std::os::unix::fs::PermissionsExt;
        // A directory name that itself needs quoting, so argv[0] is exercised too.
        let sub = dir.join("bin dir 'q' $x `y`");
        std::fs::create_dir(&sub).unwrap();
        let path = sub.join("print args");
        std::fs::write(&path, "#!/bin/sh\nprintf '%s\\0' \"$0\" \"$@\"\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        path.into_os_string()
    }

    fn tricky_args() -> Vec<OsString> {
        let mut args: Vec<OsString> = [
            "plain",
            "with space",
            "",
            "it's",
            "\"double\"",
            "$HOME",
            "${PATH}",
            "`id`",
            "$(id)",
            "a\nb",
            "tab\there",
            "*",
            "?",
            "[a]",
            "~",
            "~root",
            "#comment",
            "a;b",
            "a&&b",
            "a|b",
            "<in",
            ">out",
            "\\",
            "\\'",
            "'''",
            "--key=value",
            "x=1",
            "!",
            "{a,b}",
            "é ü 日本",
            "trailing\n",
            "\n",
            " ",
            "-",
            "--",
            "%s",
            "a'b\"c$d`e\\f",
        ]
        .iter()
        .map(OsString::from)
        .collect();
        args.push(OsString::from_vec(vec![0xff, 0xfe, b'a', 0x80]));
        args.push(OsString::from_vec(vec![b'x', 0xc3, b' ', 0xe2, 0x82]));
        args.push(OsString::from_vec(vec![0xff]));
        args
    }

    #[test]
    fn sh_runs_exactly_the_quoted_argv() {
        let dir = tempfile::tempdir().unwrap();
        let exe = printer(dir.path());
        let mut argv = vec![exe.clone()];
        argv.extend(tricky_args());
        let line = quote_argv(&argv);
        assert!(!line.contains('\0'));
        for shell in ["sh", "bash", "dash"] {
            if !Command::new(shell).arg("-c").arg("true").status().is_ok_and(|s| s.success()) {
                continue;
            }
            let seen = run_line(shell, &line);
            let expected: Vec<Vec<u8>> = argv.iter().map(|a| a.as_bytes().to_vec()).collect();
            assert_eq!(seen, expected, "{shell}: {line}");
        }
    }

    #[test]
    fn each_argument_alone_round_trips() {
        let dir = tempfile::tempdir().unwrap();
        let exe = printer(dir.path());
        for arg in tricky_args() {
            let line = quote_argv([exe.as_os_str(), arg.as_os_str()]);
            let seen = run_line("sh", &line);
            assert_eq!(seen[1], arg.as_bytes(), "{line}");
        }
    }

    #[test]
    fn first_word_assignments_and_reserved_words_are_quoted() {
        assert_eq!(quote_argv(["A=b", "A=b"]), "'A=b' A=b");
        assert_eq!(quote_argv(["if", "if"]), "'if' if");
        assert_eq!(quote_argv(["reftool", "job", "wait", "job_0a"]), "reftool job wait job_0a");
        assert_eq!(quote_arg(""), "''");
        assert_eq!(quote_arg("it's"), "'it'\\''s'");
    }

    #[test]
    fn invalid_bytes_become_ascii_printf() {
        let q = quote_arg(OsString::from_vec(vec![b'a', 0xff]));
        assert_eq!(q, "'a'\"$(printf '\\377')\"");
        assert!(q.is_ascii());
    }
}
