//! The test lanes are chosen by where a test lives, never by its name (`.config/nextest.toml`):
//! the edit loop runs every test outside a module named `heavy` or `alone`, and every filter of
//! the file selects by such a module or by a binary. A filter that named tests would let a
//! rename move a test between lanes unseen; this test refuses one.
//!
//! What keeps a slow test from living outside those modules is the time bound the file gives
//! light tests in both lanes (the edit loop's `slow-timeout`, and CI's override for light
//! tests): one that outgrows it fails, saying it is slow, and moves to a `heavy` module.

use conform_workspace::workspace_root;

/// The edit loop's filter: everything outside the two modules.
const EDIT_LANE: &str = "not test(/(^|::)(heavy|alone)::/)";

/// The `test(...)` regexes a filter may use: a module path ending in a lane's module.
fn selects_a_lane_module(pattern: &str) -> bool {
    ["(heavy|alone)::", "heavy::", "alone::"].iter().any(|end| pattern.ends_with(end))
}

/// Every `test(...)` predicate in a filterset expression, with what it matches.
fn test_predicates(filter: &str) -> Vec<&str> {
    let mut found = Vec::new();
    let mut rest = filter;
    while let Some(at) = rest.find("test(") {
        // `test(` but not the end of another name (`binary_id(`, `rdeps(`...).
        let before = rest[..at].chars().next_back();
        let after = &rest[at + "test(".len()..];
        // A regex (`/.../`) may hold parentheses of its own: it ends at `/)`.
        let end = match after.strip_prefix('/') {
            Some(regex) => regex.find("/)").map_or(after.len(), |e| e + 2),
            None => after.find(')').unwrap_or(after.len()),
        };
        if !before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            found.push(&after[..end]);
        }
        rest = &after[end..];
    }
    found
}

/// Every filter of the file: each profile's `default-filter`, each override's `filter`.
fn filters(config: &toml::Table) -> Vec<(String, String)> {
    let mut all = Vec::new();
    let profiles = config.get("profile").and_then(toml::Value::as_table);
    for (name, profile) in profiles.into_iter().flatten() {
        if let Some(filter) = profile.get("default-filter").and_then(toml::Value::as_str) {
            all.push((format!("profile.{name}.default-filter"), filter.to_owned()));
        }
        let overrides = profile.get("overrides").and_then(toml::Value::as_array);
        for (n, over) in overrides.into_iter().flatten().enumerate() {
            if let Some(filter) = over.get("filter").and_then(toml::Value::as_str) {
                all.push((format!("profile.{name}.overrides[{n}]"), filter.to_owned()));
            }
        }
    }
    all
}

fn config() -> toml::Table {
    let path = workspace_root().join(".config").join("nextest.toml");
    let text = std::fs::read_to_string(&path).expect(".config/nextest.toml is readable");
    toml::from_str(&text).expect(".config/nextest.toml is TOML")
}

#[test]
fn the_edit_lane_is_everything_outside_the_heavy_and_alone_modules() {
    let config = config();
    let default = config["profile"]["default"]["default-filter"].as_str();
    assert_eq!(
        default.map(str::trim),
        Some(EDIT_LANE),
        "the edit loop leaves out exactly the `heavy` and `alone` modules: move a slow test \
         into one instead of naming it in the filter"
    );
}

#[test]
fn every_filter_selects_by_module_or_binary_never_by_a_test_s_name() {
    let mut named = Vec::new();
    for (place, filter) in filters(&config()) {
        for predicate in test_predicates(&filter) {
            let regex = predicate.strip_prefix('/').and_then(|p| p.strip_suffix('/'));
            if !regex.is_some_and(selects_a_lane_module) {
                named.push(format!("{place}: test({predicate})"));
            }
        }
    }
    assert!(
        named.is_empty(),
        "these filters select tests by name, so a rename would move a test between lanes or \
         groups unseen; put the tests in a `heavy` or `alone` module and select the module:\n{}",
        named.join("\n")
    );
}

/// The guard can fail: a filter naming a test, or a module other than the lanes', is refused.
#[test]
fn the_guard_refuses_a_filter_that_names_a_test() {
    let predicates = test_predicates(
        "binary_id(conform::it) & test(/^engine::a_hanging_tool/) | test(=pyagent::correct) \
         | not test(/(^|::)(heavy|alone)::/)",
    );
    assert_eq!(
        predicates,
        ["/^engine::a_hanging_tool/", "=pyagent::correct", "/(^|::)(heavy|alone)::/"]
    );
    assert!(!selects_a_lane_module("^engine::a_hanging_tool"));
    assert!(selects_a_lane_module("^reftool_catalogue::heavy::"));
    assert!(selects_a_lane_module("(^|::)(heavy|alone)::"));
}
