//! Durations on the command line: `--timeout`, `--budget` and `AGENT_CALL_BUDGET_MS`.
//!
//! Accepted forms: a whole number of milliseconds (`2000`), or a whole number with a unit:
//! `ms`, `s`, `m`, `h` (`2000ms`, `5s`, `1m`, `2h`). Zero is allowed (for `--budget 0` it
//! switches the budget off). Anything else (negative, fractional, empty, unknown unit, larger
//! than [`MAX_DURATION_MS`]) is an error that names the offending text, so the caller can be
//! given an `ARG_ERROR` in the validation phase.

use std::time::Duration;

/// The largest duration accepted: one year. Larger values are almost certainly a mistake (a
/// value in microseconds, a stray digit), and refusing them keeps every deadline computation
/// far from overflow.
pub const MAX_DURATION_MS: u64 = 365 * 24 * 60 * 60 * 1000;

/// Why a duration was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing was given.
    #[error("empty duration; expected e.g. 5s, 2000ms, 1m or 2000")]
    Empty,
    /// A leading minus sign.
    #[error("negative duration {0:?}; expected zero or more")]
    Negative(String),
    /// Not a number with an optional unit.
    #[error("malformed duration {0:?}; expected e.g. 5s, 2000ms, 1m or 2000 (milliseconds)")]
    Malformed(String),
    /// Larger than [`MAX_DURATION_MS`].
    #[error("duration {0:?} is too large; the maximum is one year")]
    TooLarge(String),
}

/// Parses a duration as described in the module docs.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.is_empty() {
        return Err(DurationError::Empty);
    }
    if trimmed.starts_with('-') {
        return Err(DurationError::Negative(text.to_owned()));
    }
    let split = trimmed.find(|c: char| !c.is_ascii_digit()).unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    if digits.is_empty() {
        return Err(DurationError::Malformed(text.to_owned()));
    }
    let per_unit_ms: u64 = match unit {
        "" | "ms" => 1,
        "s" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(DurationError::Malformed(text.to_owned())),
    };
    let value: u64 = digits.parse().map_err(|_| DurationError::TooLarge(text.to_owned()))?;
    let ms = value
        .checked_mul(per_unit_ms)
        .filter(|ms| *ms <= MAX_DURATION_MS)
        .ok_or_else(|| DurationError::TooLarge(text.to_owned()))?;
    Ok(Duration::from_millis(ms))
}

/// The milliseconds of a duration, saturating.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_the_documented_forms() {
        assert_eq!(parse_duration("2000"), Ok(Duration::from_millis(2000)));
        assert_eq!(parse_duration("2000ms"), Ok(Duration::from_millis(2000)));
        assert_eq!(parse_duration("5s"), Ok(Duration::from_secs(5)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration(" 7s "), Ok(Duration::from_secs(7)));
    }

    #[test]
    fn refuses_everything_else() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert_eq!(parse_duration("-5s"), Err(DurationError::Negative("-5s".into())));
        for bad in ["s", "5 s", "1.5s", "5sec", "abc", "5d", "0x10", "+5"] {
            assert_eq!(parse_duration(bad), Err(DurationError::Malformed(bad.into())), "{bad}");
        }
        for huge in ["99999999999999999999999", "366d", "9000h"] {
            assert!(parse_duration(huge).is_err(), "{huge}");
        }
        assert_eq!(parse_duration("9000h"), Err(DurationError::TooLarge("9000h".into())));
    }
}
