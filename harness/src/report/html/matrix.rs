//! The page of `conform matrix`: implementations as columns, the scenarios as rows grouped
//! by requirement, the claims of each on top; each cell says a scenario's status in words and
//! links to that run's evidence and timeline on the tool's own page ([`super::run_page`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::view::RunView;
use super::{Html, Page, Section, attr, claim_word, esc, scenario_anchor, status_badge};
use crate::levels::Claim;
use crate::scenario::Obligation;

/// One implementation of the matrix.
#[derive(Debug, Clone, Copy)]
pub struct Column<'a> {
    /// Its name, as the matrix file gives it.
    pub name: &'a str,
    /// Its own page, relative to the matrix page (`reftool.html`).
    pub page: &'a str,
    /// Its run, or why there is none (a run that gave no report).
    pub run: Result<&'a RunView, &'a str>,
}

/// The matrix page: `title` as its heading, one column per implementation.
pub fn page(title: &str, columns: &[Column<'_>]) -> Page {
    let mut page = Page::new(title);
    let spec: Vec<&str> = columns
        .iter()
        .filter_map(|c| c.run.ok().map(|r| r.spec_version.as_str()))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    page.header = Html::own(format!(
        "<h1>{}</h1>\n<p>{} implementations against the CLI Agent Spec {}: each row a scenario (one acceptance criterion), each column an implementation's run; a cell says the scenario's status and links to that run's evidence and timeline.</p>",
        esc(title),
        columns.len(),
        esc(&spec.join(", "))
    ));
    page.push(Section::new("matrix", "Scenarios by implementation", table(columns)));
    page
}

/// Every scenario any run holds, by requirement, then id, with its level.
fn rows(columns: &[Column<'_>]) -> BTreeMap<String, BTreeMap<String, Obligation>> {
    let mut rows: BTreeMap<String, BTreeMap<String, Obligation>> = BTreeMap::new();
    for run in columns.iter().filter_map(|c| c.run.ok()) {
        for s in &run.scenarios {
            rows.entry(s.requirement.clone()).or_default().insert(s.id.clone(), s.level);
        }
    }
    rows
}

fn table(columns: &[Column<'_>]) -> Html {
    let width = columns.len() + 2;
    let mut s = String::from(
        "<div class=\"wide\"><table class=\"matrix\"><caption>Each cell: the scenario's status in that run (pass, fail, skip, error, xfail: a failure its baseline expects), linked to its evidence; a dash: not in that run.</caption><thead><tr><th scope=\"col\">scenario</th><th scope=\"col\">level</th>",
    );
    for c in columns {
        let _ =
            write!(s, "<th scope=\"col\"><a href=\"{}\">{}</a></th>", attr(c.page), esc(c.name));
    }
    s.push_str("</tr></thead>");
    // The claims of each: the spec's levels and §79, then the counts.
    let _ = write!(
        s,
        "<tbody class=\"req\"><tr><th scope=\"rowgroup\" colspan=\"{width}\">Claims</th></tr>"
    );
    let claims: Vec<(String, String)> = columns
        .iter()
        .filter_map(|c| c.run.ok())
        .flat_map(|r| r.claims.iter().map(|c| (c.claim.clone(), c.name.clone())))
        .fold(Vec::new(), |mut all, claim| {
            if !all.contains(&claim) {
                all.push(claim);
            }
            all
        });
    for (claim, name) in &claims {
        let _ = write!(s, "<tr><th scope=\"row\" colspan=\"2\">{}</th>", esc(name));
        for c in columns {
            let verdict = c.run.ok().and_then(|r| r.claims.iter().find(|v| &v.claim == claim));
            match verdict {
                Some(v) => {
                    let why = match (v.verdict, v.failed.is_empty()) {
                        (Claim::Fail, false) => format!("failed: {}", v.failed.join(", ")),
                        (Claim::Incomplete, _) => {
                            format!("{} `must` scenario(s) not judged", v.not_judged)
                        }
                        _ => String::new(),
                    };
                    let _ = write!(
                        s,
                        "<td class=\"c-{}\" title=\"{}\">{}</td>",
                        attr(&claim_word(v.verdict).replace(' ', "-")),
                        attr(&why),
                        status_badge(claim_word(v.verdict))
                    );
                }
                None => s.push_str("<td>—</td>"),
            }
        }
        s.push_str("</tr>");
    }
    s.push_str("<tr><th scope=\"row\" colspan=\"2\">scenarios</th>");
    for c in columns {
        match c.run {
            Ok(r) => {
                let _ = write!(
                    s,
                    "<td>{} pass, {} fail, {} skip{}</td>",
                    r.counts.pass,
                    r.counts.fail,
                    r.counts.skip,
                    match r.counts.error {
                        0 => String::new(),
                        n => format!(", {n} error"),
                    }
                );
            }
            Err(why) => {
                let _ = write!(s, "<td>no report: {}</td>", esc(why));
            }
        }
    }
    s.push_str("</tr></tbody>");
    for (requirement, scenarios) in rows(columns) {
        let _ = write!(
            s,
            "<tbody class=\"req\"><tr><th scope=\"rowgroup\" colspan=\"{width}\">{}</th></tr>",
            esc(&requirement)
        );
        for (id, level) in scenarios {
            let _ = write!(
                s,
                "<tr><th scope=\"row\"><code>{}</code></th><td>{}</td>",
                esc(&id),
                level.as_str()
            );
            for c in columns {
                let found = c.run.ok().and_then(|r| r.scenario(&id));
                match found {
                    Some(scenario) => {
                        let word = scenario.status_word();
                        let why = match (&scenario.reason, scenario.findings.first()) {
                            (Some(reason), _) => reason.clone(),
                            (None, Some(f)) => format!("[{}] {}", f.check, f.message),
                            (None, None) => scenario.message.clone().unwrap_or_default(),
                        };
                        let _ = write!(
                            s,
                            "<td class=\"c-{word}\"><a href=\"{}#{}\" title=\"{}\">{}</a></td>",
                            attr(c.page),
                            attr(&scenario_anchor(&id)),
                            attr(&why),
                            status_badge(word)
                        );
                    }
                    None => s.push_str("<td>—</td>"),
                }
            }
            s.push_str("</tr>");
        }
        s.push_str("</tbody>");
    }
    s.push_str("</table></div>");
    Html::own(s)
}
