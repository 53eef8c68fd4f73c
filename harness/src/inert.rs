//! Foundation: text conform did not write, made visible and inert before it reaches a terminal
//! or a text report.
//!
//! A tool's stdout and stderr, its `continue_command`, a process's command line, a path it made:
//! any of them may hold bytes a terminal acts on (`ESC[2J` clears the screen, `ESC]0;…BEL` sets
//! the window title, a CSI sequence restyles a CI log, U+202E reverses what follows). Every
//! place conform shows such text in its human report, its progress lines, its messages on
//! stderr, the Markdown summary and the JUnit report passes it through this module, which
//! writes each such character as a visible escape instead:
//!
//! | character                                  | shown as                  |
//! |--------------------------------------------|---------------------------|
//! | ESC (U+001B)                               | `\e`                      |
//! | carriage return                            | `\r`                      |
//! | newline, tab                               | kept by [`text`]; `\n`, `\t` by [`line()`] |
//! | any other C0 control (U+0000–U+001F), DEL  | `\xHH`, e.g. `\x07` for BEL |
//! | a C1 control (U+0080–U+009F)               | `\u{9b}`                  |
//! | a bidirectional override, embedding or isolate (U+202A–U+202E, U+2066–U+2069), LRM, RLM, ALM | `\u{202e}` |
//!
//! Everything else is kept as it is: a backslash stays one backslash, so the rendering is for
//! reading, not for parsing back (the JSON report keeps the exact text). Bytes that are not
//! UTF-8 were already shown as U+FFFD when the capture was decoded.
//!
//! conform's own colours are the one exception, and cannot be forged: a report styles its text
//! through a [`Styles`] whose sequences carry a random key, and [`Styles::finish`] makes the
//! whole report inert except the sequences with that key.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::hash::{BuildHasher, Hasher};

/// Whether a character needs escaping; newline and tab too when `one_line`.
fn needs_escape(c: char, one_line: bool) -> bool {
    match c {
        '\n' | '\t' => one_line,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}' => true,
        '\u{200e}' | '\u{200f}' | '\u{61c}' => true,
        '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}' => true,
        _ => false,
    }
}

/// Writes the visible escape of one character that needs one.
fn push_escape(out: &mut String, c: char) {
    match c {
        '\u{1b}' => out.push_str("\\e"),
        '\r' => out.push_str("\\r"),
        '\n' => out.push_str("\\n"),
        '\t' => out.push_str("\\t"),
        '\u{0}'..='\u{1f}' | '\u{7f}' => {
            let _ = write!(out, "\\x{:02x}", u32::from(c));
        }
        _ => {
            let _ = write!(out, "\\u{{{:x}}}", u32::from(c));
        }
    }
}

fn escape(text: &str, one_line: bool) -> Cow<'_, str> {
    if !text.chars().any(|c| needs_escape(c, one_line)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if needs_escape(c, one_line) {
            push_escape(&mut out, c);
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// `text` with every control character shown as a visible escape; newlines and tabs are kept
/// (for text laid out in lines: a report, a block of stderr).
pub fn text(text: &str) -> Cow<'_, str> {
    escape(text, false)
}

/// `text` on one line: like [`text`], and newlines and tabs are escaped too (for a progress
/// line, a table cell, one line of a message).
pub fn line(text: &str) -> Cow<'_, str> {
    escape(text, true)
}

/// conform's own ANSI styling for a text that is made inert as a whole: each sequence it
/// writes carries a key no tool can know, and [`Styles::finish`] turns exactly those back into
/// escape sequences while every other control character becomes visible.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Styles {
    key: [u8; 16],
}

impl Styles {
    /// Styles with a fresh random key.
    pub fn new() -> Self {
        // RandomState is seeded from the system's randomness once per process and varied per
        // instance: enough for a key that only has to be unknown to the tool.
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(0x0063_6f6e_666f_726d);
        let mut key = [0_u8; 16];
        for (i, digit) in format!("{:016x}", hasher.finish()).bytes().enumerate() {
            // A letter of the private "g".."v" alphabet: never a character a style code holds.
            key[i] = b'g' + (if digit.is_ascii_digit() { digit - b'0' } else { digit - b'a' + 10 });
        }
        Styles { key }
    }

    fn key(&self) -> &str {
        std::str::from_utf8(&self.key).unwrap_or_default()
    }

    /// `text` wrapped in the SGR style `code` (e.g. `1;31`) and a reset, to be revealed by
    /// [`Styles::finish`].
    pub fn wrap(&self, code: &str, text: &str) -> String {
        let key = self.key();
        format!("\u{1b}{key}[{code}m{text}\u{1b}{key}[0m")
    }

    /// The whole text made inert as [`text`] does (newlines and tabs kept), except the
    /// sequences [`Styles::wrap`] wrote, which become plain ANSI sequences.
    pub fn finish(&self, text: &str) -> String {
        let key = self.key();
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(c) = rest.chars().next() {
            rest = &rest[c.len_utf8()..];
            if c == '\u{1b}' && rest.starts_with(key) {
                out.push(c);
                rest = &rest[key.len()..];
            } else if needs_escape(c, false) {
                push_escape(&mut out, c);
            } else {
                out.push(c);
            }
        }
        out
    }
}

impl Default for Styles {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_become_visible_escapes() {
        assert_eq!(text("\u{1b}[2J\u{1b}]0;title\u{7}ok"), "\\e[2J\\e]0;title\\x07ok");
        assert_eq!(text("a\r\nb\tc\u{0}\u{7f}"), "a\\r\nb\tc\\x00\\x7f");
        assert_eq!(line("a\nb\tc"), "a\\nb\\tc");
        assert_eq!(text("\u{9b}31m \u{202e}txt.exe"), "\\u{9b}31m \\u{202e}txt.exe");
        assert_eq!(text("caf\u{e9} \u{2014} \u{fffd} \\e"), "caf\u{e9} \u{2014} \u{fffd} \\e");
    }

    #[test]
    fn clean_text_is_borrowed() {
        assert!(matches!(text("plain line\n"), Cow::Borrowed(_)));
        assert!(matches!(line("plain line"), Cow::Borrowed(_)));
    }

    #[test]
    fn only_keyed_styles_survive_finish() {
        let styles = Styles::new();
        let report =
            format!("{} tool said \u{1b}[31mred\u{1b}]0;x\u{7}\n", styles.wrap("1", "FAIL"));
        let shown = styles.finish(&report);
        assert_eq!(shown, "\u{1b}[1mFAIL\u{1b}[0m tool said \\e[31mred\\e]0;x\\x07\n");
        // Another key (a tool guessing one) is shown, not obeyed.
        let other = Styles::new();
        assert_ne!(other, styles);
        assert!(!styles.finish(&other.wrap("2J", "")).contains("\u{1b}[2J"));
    }
}
