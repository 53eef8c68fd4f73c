//! What is written from [`CHECKS`](super::CHECKS) rather than by hand: the manual's table of
//! checks (`harness/docs/checks.md`) and the `expect` part of the scenario schema
//! (`schemas/scenario.json`, `definitions.Expect`). Both files are committed; the tests below
//! regenerate them and fail on any drift, and `SNAPSHOTS=overwrite cargo nextest run -p conform
//! generated` rewrites them (as snapbox does).

use serde_json::{Map, Value, json};

use super::{CHECKS, Check};

/// The JSON Schema of an `expect` table: one property per check, its description the check's
/// `holds`, its type the check's `value`.
pub fn expect_schema() -> Value {
    let mut properties = Map::new();
    for check in CHECKS {
        let Some(key) = check.key else { continue };
        let mut property = Map::new();
        property.insert("description".into(), Value::String(plain(check.holds)));
        if let Value::Object(value) = (check.value)() {
            property.extend(value);
        }
        properties.insert(key.into(), Value::Object(property));
    }
    json!({
        "description": "What must hold after the step; every field is an independent check (harness/docs/checks.md, generated like this from conform's list of checks).",
        "type": "object",
        "additionalProperties": false,
        "properties": properties,
    })
}

/// The manual's table of checks (Markdown): key, what holds, the findings, what it cites.
pub fn manual_table() -> String {
    let mut out = String::from(
        "| key | holds when | finding | cites |\n|-----|------------|---------|-------|\n",
    );
    for check in CHECKS {
        let Some(key) = check.key else { continue };
        out.push_str(&format!(
            "| `{key}` | {} | {} | {} |\n",
            check.holds.replace('|', "\\|"),
            findings(check),
            if check.cites.is_empty() { "-".to_owned() } else { check.cites.join(", ") },
        ));
    }
    out
}

/// The finding kinds of a check, as reports name them.
pub(crate) fn findings(check: &Check) -> String {
    check.findings.iter().map(|k| format!("`{}`", k.as_str())).collect::<Vec<_>>().join(", ")
}

/// Markdown made plain for a JSON description: `[`x`]` links become `x`.
fn plain(text: &str) -> String {
    text.replace("[`", "`").replace("`]", "`")
}

#[cfg(test)]
mod tests {
    use std::path::{Path, PathBuf};

    use super::*;

    fn root() -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap().to_path_buf()
    }

    fn overwrite() -> bool {
        std::env::var("SNAPSHOTS").is_ok_and(|v| v == "overwrite")
    }

    /// The byte range of the value of `"Expect":` in the schema's text.
    fn expect_block(text: &str) -> std::ops::Range<usize> {
        let key = "\"Expect\": ";
        let start = text.find(key).expect("the schema defines Expect") + key.len();
        let (mut depth, mut in_string, mut escaped) = (0usize, false, false);
        for (i, c) in text[start..].char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' if in_string => escaped = true,
                '"' => in_string = !in_string,
                '{' if !in_string => depth += 1,
                '}' if !in_string => {
                    depth -= 1;
                    if depth == 0 {
                        return start..start + i + 1;
                    }
                }
                _ => {}
            }
        }
        panic!("the Expect definition does not end");
    }

    #[test]
    fn the_schema_s_expect_part_is_generated_from_the_checks() {
        let path = root().join("schemas/scenario.json");
        let text = std::fs::read_to_string(&path).unwrap();
        let schema: Value = serde_json::from_str(&text).unwrap();
        let generated = expect_schema();
        if schema["definitions"]["Expect"] == generated {
            return;
        }
        if overwrite() {
            let block = expect_block(&text);
            let pretty = serde_json::to_string_pretty(&generated).unwrap().replace('\n', "\n    ");
            let rewritten = format!("{}{pretty}{}", &text[..block.start], &text[block.end..]);
            std::fs::write(&path, rewritten).unwrap();
            return;
        }
        panic!(
            "schemas/scenario.json's `definitions.Expect` differs from conform's checks \
             (harness/src/checks/): run `SNAPSHOTS=overwrite cargo nextest run -p conform \
             generated` to rewrite it"
        );
    }

    /// The table of the manual's checks: the first block of lines starting with `|`.
    fn table_lines(text: &str) -> std::ops::Range<usize> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.iter().position(|l| l.starts_with('|')).expect("a table");
        let len = lines[start..].iter().take_while(|l| l.starts_with('|')).count();
        start..start + len
    }

    #[test]
    fn the_manual_s_table_of_checks_is_generated_from_the_checks() {
        let path = root().join("harness/docs/checks.md");
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        let range = table_lines(&text);
        let written = lines[range.clone()].join("\n") + "\n";
        let generated = manual_table();
        if written == generated {
            return;
        }
        if overwrite() {
            let mut out: Vec<&str> = lines[..range.start].to_vec();
            out.extend(generated.lines());
            out.extend(&lines[range.end..]);
            std::fs::write(&path, out.join("\n") + "\n").unwrap();
            return;
        }
        panic!(
            "harness/docs/checks.md's table differs from conform's checks (harness/src/checks/): \
             run `SNAPSHOTS=overwrite cargo nextest run -p conform generated` to rewrite it"
        );
    }
}
