//! Shared by the suite and the mutant matrix (two test crates): a copied profile keeps naming
//! the fixtures beside the original.

#![allow(clippy::unwrap_used)]

use std::path::Path;

/// Makes every `fixtures` list of the profile (roles', kit probes', the argument order's) name
/// absolute paths, wherever it sits.
pub fn absolute_fixtures(table: &mut toml::Table, base: &Path) {
    for (key, value) in table.iter_mut() {
        match value {
            toml::Value::Array(items) if key == "fixtures" => {
                for fixture in items.iter_mut() {
                    let absolute = base.join(fixture.as_str().unwrap());
                    *fixture = absolute.to_str().unwrap().into();
                }
            }
            toml::Value::Table(inner) => absolute_fixtures(inner, base),
            toml::Value::Array(items) => {
                for inner in items.iter_mut().filter_map(toml::Value::as_table_mut) {
                    absolute_fixtures(inner, base);
                }
            }
            _ => {}
        }
    }
}
