//! One test per registration refusal, and the framework's additions.

use serde_json::json;

use super::exit::{Exit, ExitCodeEntry, SideEffects};
use super::registry::{
    CommandSpec, DangerLevel, FlagSpec, Interruption, RegistrationError as E, Registry, StdoutKind,
    ValueType,
};

fn base(path: &str) -> CommandSpec {
    CommandSpec::new(path, "Does a thing", |_ctx| Ok(json!({})))
        .exit(Exit::SUCCESS, "Done", false, SideEffects::Complete)
        .job_work(|_ctx, _job| Ok(json!({})))
}

fn reader_with_interruption(detach: bool, resume: bool) -> CommandSpec {
    base("analyze")
        .exit(Exit::INCOMPLETE, "Continues", true, SideEffects::None)
        .interruption(Interruption { detach, resume, idle_timeout_ms: None, max_lifetime_ms: None })
}

fn writer_with_resume() -> CommandSpec {
    base("import")
        .danger(DangerLevel::Mutating)
        .exit(Exit::INCOMPLETE, "Some rows imported", false, SideEffects::Partial)
        .interruption(Interruption {
            detach: false,
            resume: true,
            idle_timeout_ms: None,
            max_lifetime_ms: Some(7_200_000),
        })
}

fn refuse(spec: CommandSpec) -> E {
    match Registry::new().register(spec) {
        Err(e) => e,
        Ok(()) => panic!("registration should have been refused"),
    }
}

#[test]
fn accepts_valid_declarations_and_adds_the_framework_flags() {
    let mut registry = Registry::new();
    registry.register(reader_with_interruption(true, true)).unwrap();
    registry.register(writer_with_resume()).unwrap();
    registry.register(base("plain")).unwrap();
    let analyze = registry.get("analyze").unwrap();
    assert!(analyze.accepts_budget());
    assert!(!analyze.accepts_idempotency_key());
    let import = registry.get("import").unwrap();
    assert!(import.accepts_budget() && import.accepts_idempotency_key());
    assert!(import.entry(Exit::CONFLICT).is_some() && import.entry(Exit::UNAVAILABLE).is_some());
    let plain = registry.get("plain").unwrap();
    assert!(!plain.accepts_budget() && !plain.accepts_idempotency_key());
    for framework_exit in [Exit::GENERAL_ERROR, Exit::ARG_ERROR, Exit::TIMEOUT] {
        assert!(plain.entry(framework_exit).is_some());
    }
}

#[test]
fn refuses_interruption_with_neither_detach_nor_resume() {
    assert_eq!(
        refuse(reader_with_interruption(false, false)),
        E::InterruptionNeitherDetachNorResume("analyze".into())
    );
}

#[test]
fn refuses_interruption_without_an_incomplete_entry() {
    let mut spec = reader_with_interruption(true, false);
    spec.exit_codes.remove(&Exit::INCOMPLETE);
    assert_eq!(refuse(spec), E::InterruptionWithoutIncompleteEntry("analyze".into()));
}

#[test]
fn refuses_an_incomplete_entry_that_does_not_match_the_danger_level() {
    let spec = reader_with_interruption(true, true).danger(DangerLevel::Mutating);
    assert_eq!(refuse(spec), E::IncompleteEntryMismatch("analyze".into()));
}

#[test]
fn refuses_interruption_with_async() {
    assert_eq!(
        refuse(reader_with_interruption(true, false).asynchronous()),
        E::InterruptionWithAsync("analyze".into())
    );
}

#[test]
fn refuses_stdin_through_an_unknown_positional_or_a_plain_command() {
    let with_file = |spec: CommandSpec| spec.positional("file", ValueType::String, true, "Input");
    let stdin_error =
        |path: &str| E::InvalidStdinArgument { path: path.into(), name: "file".into() };
    assert_eq!(
        refuse(reader_with_interruption(true, true).reads_stdin("file")),
        stdin_error("analyze")
    );
    assert_eq!(refuse(with_file(base("plain")).reads_stdin("file")), stdin_error("plain"));
    let declared = with_file(reader_with_interruption(true, true)).reads_stdin("file");
    assert!(Registry::new().register(declared).is_ok());
}

#[test]
fn refuses_interruption_with_streaming_default() {
    assert_eq!(
        refuse(reader_with_interruption(true, false).streaming(true, false)),
        E::InterruptionWithStreaming("analyze".into())
    );
}

#[test]
fn refuses_interruption_with_supports_streaming() {
    assert_eq!(
        refuse(reader_with_interruption(true, false).streaming(false, true)),
        E::InterruptionWithStreaming("analyze".into())
    );
}

#[test]
fn refuses_interruption_with_protocol_stdout() {
    assert_eq!(
        refuse(reader_with_interruption(true, false).stdout(StdoutKind::Protocol)),
        E::InterruptionWithProtocolStdout("analyze".into())
    );
}

#[test]
fn refuses_a_resumable_writer_without_idempotency_key() {
    assert_eq!(
        refuse(writer_with_resume().without_idempotency_key()),
        E::ResumeWriterWithoutIdempotencyKey("import".into())
    );
}

#[test]
fn refuses_a_writer_without_idempotency_key() {
    for level in [DangerLevel::Mutating, DangerLevel::Destructive] {
        let spec = base("wipe").danger(level).without_idempotency_key();
        assert_eq!(refuse(spec), E::WriterWithoutIdempotencyKey("wipe".into()));
    }
}

#[test]
fn refuses_a_retryable_entry_with_side_effects() {
    for effects in [SideEffects::Partial, SideEffects::Complete] {
        let spec = base("fetch").exit(Exit::UNAVAILABLE, "Down", true, effects);
        assert_eq!(refuse(spec), E::RetryableWithSideEffects { path: "fetch".into(), code: 12 });
    }
}

#[test]
fn refuses_zero_interruption_limits() {
    let mut spec = reader_with_interruption(true, true);
    spec.interruption = Some(Interruption {
        detach: true,
        resume: true,
        idle_timeout_ms: Some(0),
        max_lifetime_ms: None,
    });
    assert_eq!(refuse(spec), E::ZeroInterruptionLimit("analyze".into()));
}

#[test]
fn refuses_invalid_paths() {
    for path in ["", "Upper", "a..b", ".a", "a.", "a b", "a.-b", "1abc", "a_b"] {
        assert_eq!(refuse(base(path)), E::InvalidPath(path.into()), "{path:?}");
    }
}

#[test]
fn refuses_reserved_paths() {
    for path in ["manifest", "version", "job.wait", "job"] {
        assert_eq!(refuse(base(path)), E::ReservedPath(path.into()), "{path:?}");
    }
}

#[test]
fn refuses_duplicate_paths() {
    let mut registry = Registry::new();
    registry.register(base("deploy")).unwrap();
    assert_eq!(registry.register(base("deploy")), Err(E::DuplicatePath("deploy".into())));
}

#[test]
fn refuses_a_path_that_is_both_command_and_group() {
    let mut registry = Registry::new();
    registry.register(base("deploy")).unwrap();
    assert_eq!(
        registry.register(base("deploy.rollback")),
        Err(E::PathCollision("deploy.rollback".into()))
    );
    let mut registry = Registry::new();
    registry.register(base("db.dump")).unwrap();
    assert_eq!(registry.register(base("db")), Err(E::PathCollision("db".into())));
}

#[test]
fn refuses_an_empty_description() {
    let spec = CommandSpec::new("quiet", "  ", |_ctx| Ok(json!({}))).exit(
        Exit::SUCCESS,
        "Done",
        false,
        SideEffects::None,
    );
    assert_eq!(refuse(spec), E::EmptyDescription("quiet".into()));
}

#[test]
fn refuses_a_command_without_a_success_entry() {
    let spec = CommandSpec::new("quiet", "Does a thing", |_ctx| Ok(json!({})));
    assert_eq!(refuse(spec), E::MissingSuccessEntry("quiet".into()));
}

#[test]
fn refuses_undeclarable_exit_codes() {
    for code in [15, 78, 126, 143, 255] {
        let spec = base("odd").exit(Exit(code), "Odd", false, SideEffects::None);
        assert_eq!(refuse(spec), E::UndeclarableExitCode { path: "odd".into(), code });
    }
    Registry::new().register(base("odd").exit(Exit(79), "Own", false, SideEffects::None)).unwrap();
}

#[test]
fn refuses_a_misnamed_standard_exit_code() {
    let entry = ExitCodeEntry::new(Exit::NOT_FOUND, "Gone", false, SideEffects::None).named("GONE");
    let spec = base("odd").exit_entry(Exit::NOT_FOUND, entry);
    assert_eq!(
        refuse(spec),
        E::ExitCodeMisnamed { path: "odd".into(), code: 5, expected: "NOT_FOUND" }
    );
}

#[test]
fn refuses_flags_the_framework_owns_or_malformed_names() {
    for flag in ["budget", "timeout", "output", "instance-id", "idempotency-key", "Bad", ""] {
        let spec = base("odd").flag(FlagSpec::string(flag, "x"));
        assert_eq!(
            refuse(spec),
            E::ReservedOrInvalidFlag { path: "odd".into(), flag: flag.into() },
            "{flag:?}"
        );
    }
}

#[test]
fn refuses_duplicate_arguments() {
    let spec = base("odd").flag(FlagSpec::string("db", "x")).flag(FlagSpec::boolean("db", "y"));
    assert_eq!(refuse(spec), E::DuplicateArgument { path: "odd".into(), name: "db".into() });
    let spec = base("odd").flag(FlagSpec::string("db", "x")).positional(
        "db",
        ValueType::String,
        true,
        "y",
    );
    assert_eq!(refuse(spec), E::DuplicateArgument { path: "odd".into(), name: "db".into() });
}

#[test]
fn refuses_a_required_positional_after_an_optional_one() {
    let spec = base("odd").positional("first", ValueType::String, false, "x").positional(
        "second",
        ValueType::String,
        true,
        "y",
    );
    assert_eq!(refuse(spec), E::PositionalOrder { path: "odd".into(), name: "second".into() });
}

#[test]
fn refuses_a_zero_default_timeout() {
    assert_eq!(refuse(base("odd").timeout_ms(0)), E::ZeroDefaultTimeout("odd".into()));
}

#[test]
fn interruptible_commands_default_to_their_lifetime_limit() {
    use super::prepare::default_timeout_ms;
    use crate::runtime::jobs::DEFAULT_MAX_LIFETIME_MS;
    assert_eq!(default_timeout_ms(&base("plain").timeout_ms(1234)), 1234);
    assert_eq!(default_timeout_ms(&reader_with_interruption(true, true)), DEFAULT_MAX_LIFETIME_MS);
    assert_eq!(default_timeout_ms(&writer_with_resume()), 7_200_000);
}

#[test]
fn interruptible_work_needs_its_job_work() {
    let mut spec = reader_with_interruption(true, true);
    spec.job_run = None;
    assert_eq!(refuse(spec), E::MissingJobWork("analyze".into()));
}

#[test]
fn only_a_builtin_takes_budget_without_interruption() {
    assert!(matches!(
        refuse(base("waiter").budget_flag()),
        E::ReservedOrInvalidFlag { flag, .. } if flag == "budget"
    ));
    let mut registry = Registry::new();
    registry.register(base("job.wait").builtin().budget_flag()).unwrap();
    assert!(registry.get("job.wait").unwrap().accepts_budget());
}
