//! A bar chart of counts, such as where in their calls a campaign's kills fell: one labelled
//! bar per bin, its count written above it, and the whole said in words as the picture's text
//! alternative.

use std::fmt::Write as _;

use super::{Html, attr, esc};

/// One bar of a [`histogram`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bin {
    /// What the bin holds, e.g. `200-400 ms`.
    pub label: String,
    /// How many.
    pub count: u64,
}

/// Height of the bars' area.
const BARS_HEIGHT: u64 = 160;
/// Width of one bin.
const BIN_WIDTH: u64 = 56;

/// A histogram as an inline SVG image: `id` unique in the page, `title` one line, `unit` what
/// a count counts (`kills`).
pub fn histogram(id: &str, title: &str, unit: &str, bins: &[Bin]) -> Html {
    let most = bins.iter().map(|b| b.count).max().unwrap_or(0).max(1);
    let width = 40 + BIN_WIDTH * bins.len() as u64 + 20;
    let height = BARS_HEIGHT + 60;
    let words: Vec<String> =
        bins.iter().map(|b| format!("{}: {} {unit}", b.label, b.count)).collect();
    let id = attr(id);
    let mut s = String::new();
    let _ = write!(
        s,
        "<svg class=\"histogram\" role=\"img\" aria-labelledby=\"{id}-t {id}-d\" viewBox=\"0 0 {width} {height}\" width=\"{width}\" height=\"{height}\" xmlns=\"http://www.w3.org/2000/svg\"><title id=\"{id}-t\">{}</title><desc id=\"{id}-d\">{}</desc>",
        esc(title),
        esc(&words.join("; "))
    );
    let base = 20 + BARS_HEIGHT;
    let _ = write!(
        s,
        "<line class=\"tick\" x1=\"36\" y1=\"{base}\" x2=\"{}\" y2=\"{base}\"/>",
        width - 10
    );
    for (n, bin) in bins.iter().enumerate() {
        let x = 40 + BIN_WIDTH * n as u64;
        let h = bin.count * BARS_HEIGHT / most;
        let _ = write!(
            s,
            "<rect class=\"bar call\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{h}\"><title>{}: {} {}</title></rect><text class=\"axis\" x=\"{}\" y=\"{}\">{}</text><text class=\"words\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>",
            x + 6,
            base - h,
            BIN_WIDTH - 12,
            esc(&bin.label),
            bin.count,
            esc(unit),
            x + BIN_WIDTH / 2,
            base - h - 4,
            bin.count,
            x + BIN_WIDTH / 2,
            base + 16,
            esc(&bin.label)
        );
    }
    s.push_str("</svg>");
    Html(s)
}
