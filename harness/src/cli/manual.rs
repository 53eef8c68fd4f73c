//! `conform manual [TOPIC]`: the crate docs, at hand where conform is installed.
//!
//! Each topic is a file of `harness/docs/`, compiled in here and included by the crate docs
//! (`lib.rs`) as well, so the manual a vendor reads in a terminal and the one `cargo doc`
//! renders are one text.

/// One part of the manual.
#[derive(Debug, Clone, Copy)]
pub struct Topic {
    /// What `conform manual` takes, e.g. `profile`.
    pub name: &'static str,
    /// One line for the list of topics.
    pub summary: &'static str,
    /// The text, Markdown as the crate docs have it.
    pub text: &'static str,
}

/// `name: summary` pairs as [`Topic`]s, each text the file `harness/docs/<name>.md`: one name
/// for the command word and the file, so the two cannot drift apart.
macro_rules! topics {
    ($($name:literal: $summary:literal,)*) => {
        &[$(Topic {
            name: $name,
            summary: $summary,
            text: include_str!(concat!("../../docs/", $name, ".md")),
        },)*]
    };
}

/// The topics, in the order of the crate docs.
pub const TOPICS: &[Topic] = topics! {
    "running": "the commands and their options, exit codes, interruption, the HTML page",
    "matrix": "several implementations side by side: conform matrix",
    "stages": "how a run goes, one module per stage",
    "levels": "the spec's level claims and the kit's checks",
    "profile": "conform.toml: roles, kit probes, the kit's JSON profile",
    "scenarios": "the scenario format: steps and their fields, argument placements",
    "templates": "templates, duration expressions and calibration variables",
    "checks": "the checks of `expect` and the findings they give",
    "redaction": "how responses are normalized before they are compared",
    "hostile": "beside a hostile tool: inert output, sandbox removal, bounded inputs, writes outside",
    "campaign": "seeded fault campaigns: schedules, invariants, shrinking, replay, kept failures",
};

/// The topic of this name.
pub fn topic(name: &str) -> Option<&'static Topic> {
    TOPICS.iter().find(|t| t.name == name)
}

/// The list `conform manual` prints without a topic (and with an unknown one).
pub fn topic_list() -> String {
    let width = TOPICS.iter().map(|t| t.name.len()).max().unwrap_or(0);
    let mut out = String::from("conform's manual; `conform manual TOPIC` prints one of:\n");
    for t in TOPICS {
        out.push_str(&format!("  {:width$}  {}\n", t.name, t.summary));
    }
    out
}

/// A topic's text for a terminal: the crate docs' links to items (`[`redact`]`) become the
/// plain code span they show, since no link can be followed there.
pub fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("[`") {
        let (before, from) = rest.split_at(start);
        out.push_str(before);
        // `[`x`]` alone is a link rustdoc resolves; `[`x`](url)` or a table cell's `[`
        // stays as written.
        match from[2..].find("`]") {
            Some(end) if !from[2..2 + end].contains('\n') => {
                let after = &from[2 + end + 2..];
                if after.starts_with('(') || after.starts_with('[') {
                    out.push_str(&from[..2 + end + 2]);
                } else {
                    out.push('`');
                    out.push_str(&from[2..2 + end]);
                    out.push('`');
                }
                rest = after;
            }
            _ => {
                out.push_str("[`");
                rest = &from[2..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn item_links_become_code_spans() {
        assert_eq!(
            plain("see [`redact`] and [`levels::KIT_CHECKS`]."),
            "see `redact` and `levels::KIT_CHECKS`."
        );
        assert_eq!(plain("a [`link`](https://x) stays"), "a [`link`](https://x) stays");
        assert_eq!(plain("an open [`bracket"), "an open [`bracket");
    }

    #[test]
    fn every_topic_has_text() {
        for t in TOPICS {
            assert!(!t.text.trim().is_empty(), "{}", t.name);
            assert!(topic(t.name).is_some());
        }
    }
}
