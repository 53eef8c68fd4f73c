//! conform's integration tests: one binary, one module per subject.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

mod baseline;
mod cli;
mod discover;
mod engine;
mod exec;
mod hostile;
mod init;
mod install;
mod layers;
mod levels;
mod matrix;
mod profile;
mod report;
mod sandbox;
mod scenarios;
mod snapshot;
mod support;

/// Out of the edit lane (`.config/nextest.toml`: a test under a module named `heavy` or
/// `alone`): conform over the kit fixtures, streams, verdict rules; whole runs test after test.
/// Tests elsewhere that wait out a timeout or run a whole tool sit in a `heavy` module of
/// their own file.
mod heavy {
    mod kit_fixtures;
    mod ordering_streams;
    mod verdicts;
}

/// Out of the edit lane, and alone in CI (`threads-required` all): tools whose start-up and
/// timing other tests' load would stretch past the bounds conform measured.
mod alone {
    mod foreign;
    mod legal_choices;
}
