//! # conform
//!
//! The conformance suite for command-line tools that AI agents call. It drives a tool binary
//! through the acceptance criteria of the CLI Agent Spec, above all its section "Work Outlives
//! the Caller's Budget", and reports pass / fail / skip per criterion with evidence and the
//! exact command that reproduces each failure.
//!
//! These crate docs are conform's manual: how to run it, the profile a vendor writes, and the
//! scenario format the catalogue is written in. (The TOML examples below are parsed by a test,
//! so they stay true.)
//!
//! ## Running it
//!
//! ```text
//! conform run [TOOL] [--profile FILE] [--only ID]... [--skip ID]... [-j N]
//!                  [--format human|json] [--junit FILE] [--summary-md FILE]
//!                  [--snapshots DIR [--update]] [--baseline FILE] [--keep-sandboxes]
//! conform list [--format human|json]
//! conform explain SCENARIO_ID [--format human|json]
//! conform init TOOL [--output FILE]
//! conform completions SHELL
//! ```
//!
//! Without TOOL, `run` runs the profile's `[tool] command` (its first element, a path relative
//! to the profile when it holds a `/`, else a name looked up in `PATH`; the other elements lead
//! every invocation of the tool); with neither it is an `ARG_ERROR`.
//! `run` reads `./conform.toml` when `--profile` is not given, and runs without a profile when
//! there is none: every static and quick check still runs, and each scenario needing a role is
//! skipped with the reason ("profile names no `detach` role"). `--only` / `--skip` take a
//! scenario id, a requirement id, a tag or a role name. `--format json` prints one spec
//! envelope whose `data` is the report (`report::json`). Exit codes are in [`exit`]: 0 when
//! every `must` scenario that ran passed, 80 `NOT_CONFORMANT`, 81 `BASELINE_MISMATCH`,
//! 1 for a fault of conform, 2 `ARG_ERROR` for a bad invocation, an invalid profile, an
//! unreadable baseline: then nothing runs (with `--format json` the error is an envelope too).
//! Ctrl-C (or SIGTERM, SIGHUP) stops the tool's processes, removes the sandboxes and exits
//! 130 without a report ([`interrupt`]).
//!
//! ## How a run goes (one module per stage)
//!
//! Each stage is one module holding that stage's logic, and uses only the modules below it
//! (a test, `harness/tests/it/layers.rs`, reads every `crate::` reference and forbids upward
//! ones): foundations first, then the stages in the order a run meets them.
//!
//! - Foundations: [`exec`] (the process driver: bounded, captured, killed as a group),
//!   [`embedded`] (the catalogue and schemas compiled in), [`schemas`], [`scenario`] (the
//!   catalogue's model, with each criterion's [`scenario::Obligation`]: must, should, may),
//!   [`outcome`] (results as data: findings, evidence, [`outcome::SkipReason`]), [`tool`] (the
//!   tool invocation: program and leading arguments), [`stream`] (the JSONL judge), [`profile`].
//! 1. [`sandbox`] and [`prepare`]: each scenario gets a temporary HOME, XDG dirs and TMPDIR and a
//!    marker variable ([`sandbox`]); [`prepare`] fills it from the profile (`[tool] env`, the
//!    roles' and kit probes' fixtures and setup lines, by one mechanism) and registers it with
//!    [`interrupt`] so a Ctrl-C removes it.
//! 2. [`discover`]: `TOOL manifest` (or the profile's `[kit] manifest` arguments) once, accepted
//!    bare or wrapped in an envelope, for `run` and `init` alike; it tells which commands are
//!    interruptible and which write. conform refuses to run a mutating or destructive command
//!    that the profile does not name in a role (the `job` built-ins aside: they only touch jobs
//!    the scenario started in its own sandbox).
//!    It runs once, and its result is the headline of a tool it cannot use: when the manifest
//!    command hangs, dies or cannot start, `manifest-valid` fails with that one finding (its
//!    run is the evidence, not repeated) and every other scenario is skipped with that reason,
//!    so a hanging tool costs one discovery limit (10 s), not every scenario's limits; when it
//!    answers without a manifest, only the scenarios that judge one are skipped. Every scenario
//!    that needs the manifest runs the profile's manifest command (`probe = "manifest"`).
//! 3. [`plan`]: the catalogue, filtered; scenarios whose roles or kit probes the profile lacks
//!    are skipped with a typed reason.
//! 4. [`calibrate`]: each role a scenario needs runs once with `--budget 0` (plainly, when its
//!    command declares no interruption); its duration D and response are cached for the run
//!    (computed once, also with `-j`, and announced as an event). A calibration that does not
//!    exit 0 with a JSON response is a harness error of the scenarios needing it: the profile's
//!    role is not usable.
//! 5. [`step`]: the interpreter of a scenario's steps; it resolves templates, durations and
//!    calibrated values, and hands observations to [`checks`], pure functions that return
//!    findings. After the steps every job seen is cancelled.
//! 6. [`run`]: the engine, which only schedules (`-j N`) and takes each scenario through the
//!    stages, then sweeps its sandbox: a process of the scenario still running (in its cgroup
//!    where cgroups v2 are writable, carrying its marker, or an orphan conform adopted as child
//!    subreaper and charged to it, even one that cleared its environment and left the session)
//!    is a `leaked-process` finding, and killed. Sandboxes and cgroups that a conform killed
//!    with SIGKILL left behind are removed by the next run, which says so on stderr; a live
//!    conform's are never touched.
//! 7. [`levels`] and [`summary`]: the spec's level claims and the kit's checks, then counts,
//!    verdicts, coverage and conform's exit code, computed once for every reporter.
//! 8. [`event`] and [`report`]: one event stream, several reporters; [`baseline`] and
//!    [`snapshot`] mark results before they are reported; [`redact`] normalizes responses for
//!    every comparison; [`init`] and [`cli`] are the binary's edge.
//!
//! ## Level verdicts
//!
//! The spec lets a tool claim Level 1 (agent-safe basics: twelve named requirements), Level 2
//! (agent-reliable: Level 1 and every other `P0` requirement) or Level 3 (every requirement);
//! §79's six requirements (REQ-C-033, REQ-F-080, REQ-F-081, REQ-F-082, REQ-C-034, REQ-C-035)
//! are `P1`, so Level 3, and get a claim of their own, `interruption`. A scenario belongs to
//! the level of its requirement, by a table in [`levels`] (no key in scenario files: the
//! requirement decides). A claim is judged over the `must` scenarios of its requirements (a
//! level: of its own and every lower level): `fail` when one of them failed, else
//! `incomplete` when one was skipped (a missing role or kit probe kind), ended in a harness
//! error, failed as a baseline expected, or was left out by `--only` / `--skip`, or none
//! exists; else `pass`. A pass covers what conform checks: claiming a level still needs the
//! review of criteria no outside check can see. The claims are in the human summary
//! (`spec levels:` and `§79 ...:` lines), the JSON report's `data.claims`, the Markdown
//! summary's claim table, and as `claim.level-1` ... `claim.interruption` properties of every
//! JUnit suite. They never change conform's exit code.
//!
//! The spec's own conformance kit verifies the levels with fourteen checks. Each has conform
//! scenarios that make it, the same judgement or a stricter one ([`levels::KIT_CHECKS`]; the
//! README has the table, with the fixtures that fail each), and every report answers them one
//! by one in the kit's words, `pass`, `fail` or `skip`: the `spec kit checks:` line of the
//! human and Markdown summaries and `data.kit_checks` of the JSON report. A kit profile in the
//! kit's own JSON format is read as it is (`--profile kit-profile.json`, see [`profile`]).
//!
//! ## The profile: `conform.toml`
//!
//! `conform init TOOL` drafts one from the manifest ([`init`]): every role commented out under
//! the commands whose declaration suits it, ready to fill in.
//!
//! Long-running behaviour cannot be provoked from a manifest alone, so the vendor names
//! **roles**, invocations with a known character:
//!
//! | role            | what the invocation must be                                            |
//! |-----------------|------------------------------------------------------------------------|
//! | `detach`        | a `detach: true` command whose work takes at least about 1.2 s          |
//! | `resume_reader` | a read-only `resume: true, detach: false` command                       |
//! | `resume_writer` | a mutating `resume: true, detach: false` command (takes an idempotency key) |
//! | `detach_only`   | a `detach: true, resume: false` command                                 |
//! | `plain_slow`    | a command without interruption that outlives a short `--timeout`        |
//! | `async`         | an `async: true` command: returns a job at once                         |
//! | `stalling`      | an interruptible command whose progress stops (for the idle watchdog)  |
//! | `idempotent_writer` | a writer that takes `--idempotency-key`, interruptible or not (REQ-C-007) |
//!
//! ```toml
//! # conform.toml
//! [tool]
//! env = { MYTOOL_PACE_MS = "200" }   # for every invocation
//! instance_flag = "--instance-id"     # how to select an instance (or instance_env = "...")
//!
//! [roles.detach]
//! argv = ["analyze", "big.csv"]       # appended to the tool
//! fixtures = ["fixtures/big.csv"]     # relative to this file; copied into the sandbox's cwd
//!
//! [roles.resume_writer]
//! argv = ["import", "rows.csv", "--db", "rows.db"]
//! fixtures = ["fixtures/rows.csv"]
//! setup = ["mytool migrate --db rows.db"]   # sh -c, in the sandbox, before each scenario
//! env = { MYTOOL_CHUNK = "10" }
//! stdin = "closed"                    # or "open", "pty"; or stdin_text = "..."
//!
//! [kit]                               # the spec kit's probes
//! read = [["version"]]
//! invalid = [["analyze", "--no-such-flag"]]
//! setup = ["mkdir -p cache"]          # before each scenario that runs kit probes
//! timeout_seconds = 10                # optional: the limit of every kit probe, (0, 120]
//! manifest = ["manifest"]             # optional: what prints the manifest (the default)
//!
//! [[kit.stream]]                      # a command writing a JSONL stream (REQ-O-004)
//! argv = ["export", "big.csv", "--stream"]
//! deadline_seconds = 20               # optional, (0, 600]: killed (and failed) after it
//! signal = "INT"                      # optional, with after_lines: SIGINT after 3 lines
//! after_lines = 3
//!
//! [kit.argument_order]                # a safe command and a global option to move around
//! command_path = ["list"]
//! local_args = ["--limit", "3"]
//! global_flag = "--output"
//! value = "json"                      # stdout: one envelope
//! alternate_value = "text"            # accepted, with different stdout
//! positional = "data"                 # optional: for the option-after-positional checks
//!
//! [[kit.destructive]]
//! argv = ["purge", "--db", "shop.db"]
//! dry_run_flag = "--dry-run"
//! setup = ['"$CONFORM_TOOL" migrate --db shop.db']   # makes what the probe would destroy
//! fixtures = ["fixtures/seed.csv"]
//! ```
//!
//! Kit probes run in a scenario's sandbox like roles: `[kit]`'s `fixtures` and `setup` prepare
//! it for any scenario that runs a kit probe, then each destructive probe's own `fixtures` and
//! `setup` for a scenario that runs destructive probes (likewise each stream probe's, and
//! `[kit.argument_order]`'s, which take the same two keys). With `timeout_seconds`, every kit
//! probe step runs under that limit: one still running then is killed and fails, as the kit
//! counts a hang. A stream probe's `deadline_seconds` defaults to it (else conform's 30 s).
//! `[tool] command = ["python3", "cli.py"]` names the tool when `conform run` is given none.
//! Every setup command (of roles and probes) finds the tool in `CONFORM_TOOL`: its absolute
//! path, or, when the command has leading arguments, a script in the sandbox that runs the
//! whole command with the arguments it is given.
//!
//! Every key is checked ([`profile`]): an unknown key or role, an empty argv, a missing
//! fixture, a blank setup line, a probe that confirms itself (`--yes`, `--force`, `--confirm`,
//! `--confirm-destructive`, and in a destructive probe `-y`, `-f`: conform never confirms a
//! destructive command) is an `ARG_ERROR` with file, line and column. `schemas/profile.json` describes the same format as a JSON Schema.
//!
//! A `--profile` whose name ends in `.json` is read as a profile of the spec's own
//! conformance kit (its `schemas/conformance-profile.md`: `schema_version` "1.0", `tool`,
//! `command`, `timeout_seconds`, `manifest`, `argument_order`, and `probes` of kind `read`,
//! `invalid`, `destructive` with a `dry_run_flag`, or `stream` with `deadline_seconds` and
//! `signal` with `after_lines`): `command` becomes `[tool] command`, the rest `[kit]`, so a vendor with a kit
//! profile gets every kit check from conform unchanged ([`profile::kit`]). It names no roles,
//! so the §79 scenarios are skipped with that reason until a `conform.toml` adds them. The kit
//! runs its probes in the directory it is started from, so they name files there (`shop.db`,
//! `site/`); conform runs them in its sandboxes as always, each of whose working directory
//! starts as a copy of the profile's directory: at most 10 000 entries and 64 MiB (a larger
//! directory is a setup error saying so), symbolic links never followed nor copied, `.git` and
//! conform's own sandboxes left out. Nothing is written beside the profile; what a probe
//! changes, it changes in the copy.
//!
//! ## Scenarios
//!
//! One file per acceptance criterion, `scenarios/<REQUIREMENT>/<id>.toml`:
//!
//! ```toml
//! # scenario REQ-F-082/continue-loop-ends-in-calibrated-response.toml
//! id = "continue-loop-ends-in-calibrated-response"
//! requirement = "REQ-F-082"
//! criterion = "Running continue_command verbatim until the exit is not 14 ends with the response the work gives with --budget 0"
//! level = "must"              # must | should | may
//! roles = ["detach"]          # the first is the primary role (calibration variables)
//! tags = ["incomplete", "continue"]
//!
//! [[steps]]
//! action = "run"
//! name = "call"
//! role = "detach"
//! budget = "{budget}"
//! expect = { exit = 14, schema = "incomplete", elapsed_max = "{budget} + {slack}" }
//!
//! [[steps]]
//! action = "continue"
//! name = "continue"
//! from = "call"
//! env = { AGENT_CALL_BUDGET_MS = "{budget}" }
//! expect = { matches_calibrated = true, progress_monotonic = true }
//! ```
//!
//! Unknown keys are errors (with line and column); the id must equal the file name and the
//! requirement the directory. A scenario stops at its first step with a finding.
//! `schemas/scenario.json` describes the format as a JSON Schema; a test validates every file.
//!
//! ### Steps (`action`)
//!
//! | action        | does                                                                   |
//! |---------------|------------------------------------------------------------------------|
//! | `run`         | runs the tool: `TOOL <role argv> <args> [--budget B] [--timeout T]`      |
//! | `continue`    | runs `data.continue_command` of step `from`'s last response with `sh -c`, verbatim, again while it exits 14 (`max_hops`, default 100); when `from` did not exit 14, nothing runs and its response is judged |
//! | `cancel`      | runs `data.cancel_command` of step `from`'s last response with `sh -c`  |
//! | `kill-worker` | signals (`signal`, default `KILL`) every process carrying the sandbox marker: no step runs then, so each is a detached worker; finding none is a finding |
//! | `sleep`       | waits `duration`                                                        |
//! | `shell`       | runs `command` (a template) with `sh -c` in the sandbox's working directory, e.g. to change the input between two calls; a non-zero exit is a `shell` finding |
//!
//! Fields of `run`: `role` (listed in `roles`), `args`, `budget` and `timeout` (duration
//! expressions, rendered `0` or `<n>ms`), `env`, `env_remove`, `stdin` (`closed` | `open` |
//! `pty`) or `stdin_text`, `instance` (selects an instance the profile's way; tag the scenario
//! `instance`), `count` (that many identical copies at once), `kill_group = { after, signal }`
//! (a signal to the step's process group, default `TERM`, even after its leader exited),
//! `limit` (conform's own bound; default max(3 × D + 30 s, 30 s)), `tool_dir` (run the tool
//! through a symbolic link in this sandbox directory, whose name may hold spaces, quotes and
//! `$`: command lines the tool builds from its own path must quote it), `probe` (instead of a
//! role: once for each kit probe of the profile, `read`, `invalid`, `destructive` as written,
//! `any` for all three (reads, then invalids, then destructive ones unconfirmed: the runs the
//! kit judges most of its checks on), or `destructive-preview` with its dry-run flag, `stream`
//! for every stream probe, signalled when it declares a signal, `stream-signal` for those that
//! do, `manifest` for the manifest command and `help` for `--help`, both always there; a step
//! whose kind the profile has no probes of runs nothing, and a scenario none of whose probe
//! steps runs anything is skipped; every probe runs under the kit's `timeout_seconds` when the
//! profile sets one), `kit_hangs` (below), `order` (instead of a role or a probe: the argv of `[kit.argument_order]` in a
//! placement, below; a profile without it, or without `positional` for the last three, skips
//! the scenario), `expect`. `continue` and
//! `cancel` run with the `from` step's environment plus their own `env` / `env_remove`.
//!
//! A stream step reads stdout line by line; with a signal, SIGINT goes to the tool's process
//! (not its group) as soon as `after_lines` lines were read, and in a `stream-signal` step a
//! stream that ends before is a `stream-signal` finding ("never sent": the `stream` step judges
//! the same stream on its lines alone, as the kit does); a stream still running at its deadline has its
//! process group killed and is a `stream-deadline` finding. Its response (what `json`,
//! `schema`, `same_*` look at) is the stream's terminal line.
//!
//! `kit_hangs = true` on a probe step charges a run that outlives its limit as the spec kit
//! does, so that one hang fails one kit check: the kit runs each probe with stdin closed first
//! and judges nothing else of it when that run hangs (`read-probes-end-with-stdin-closed`
//! reports it), then with stdin open (`read-probes-end-with-stdin-open`), then with NO_COLOR,
//! and previews a destructive probe last (a hanging preview is `dry-run-previews`'). When the
//! step's run is not already that first run (stdin open, extra environment, a preview), conform
//! runs the probe that way once more (evidence `<step>-plain#N`, `<step>-unconfirmed#N`) to
//! tell which hang it is. A run charged to another scenario is left out of the step's verdict;
//! a scenario with nothing else wrong is then skipped, naming the scenario that judges the hang
//! (so the kit check reads `skip` where the kit would count fewer runs).
//!
//! Placements of `order`, with F the global flag, V its value, A the alternate value, P the
//! command path, L the local arguments and X the positional (`args` follow):
//!
//! | placement               | argv        | placement               | argv          |
//! |-------------------------|-------------|-------------------------|---------------|
//! | `value-before-path`     | F V P L     | `alternate-before-path` | F A P L       |
//! | `value-between`         | P F V L     | `alternate-between`     | P F A L       |
//! | `value-after-local`     | P L F V     | `alternate-after-local` | P L F A       |
//! | `conflicting-repeat`    | F V P L F A | `same-value-repeat`     | F V P L F V   |
//! | `positional-then-local` | P X L       | `local-then-positional` | P L X         |
//! | `positional-alone`      | P X         |                         |               |
//!
//! ### Templates and durations
//!
//! Strings in `args`, `env` values, `stdin_text`, `command`, `json` `equals` / `not_equals` /
//! `matches` and the comparisons are templates:
//! `{budget}` and the other calibration variables (as milliseconds), `{tool}`, `{sandbox}`,
//! `{work}`, `{input}` (the primary role's input file: the first word of its argv that names a
//! regular file in the working directory; a scenario using it is skipped when there is none),
//! and `{@step/json/pointer}`, a value of an earlier step's last response (e.g.
//! `{@start/data/job_id}`); `{{` / `}}` are literal braces. Duration fields take expressions:
//! terms joined by `+`, each a literal (`2s`, `1500ms`, `1m`, bare milliseconds) or a
//! variable, optionally `N *` before it. Variables ([`calibrate`]): `{calibrated}` = D,
//! `{budget}` = max(D / 4, 300 ms), `{half_budget}`, `{long_budget}` = 3 × D + 2 s, and
//! `{slack}` = 1500 ms (needs no calibration), and `{startup}`, how long this tool's manifest
//! command took at discovery (measured once per run, needs no calibration). A scenario using
//! `{budget}` or `{half_budget}` is skipped when its role's D is below 1.2 s (too fast to
//! interrupt).
//!
//! A bound the spec does not state is written in these variables, never as an absolute
//! constant: "at once" is `2 * {startup} + {slack}`, "sooner than the work" is
//! `{calibrated} + {slack}`. A timing finding shows the bound's terms as measured for the tool
//! (`took 3100 ms, more than 2420 ms (920 ms + 1500 ms)`), never the variables' names.
//!
//! ### Checks (`expect`)
//!
//! Each key is one independent check; each failure is a finding named in brackets.
//!
//! | key                  | holds when                                                   | finding |
//! |----------------------|--------------------------------------------------------------|---------|
//! | `exit`               | the exit code is this one (or one of a list)                 | `exit-code` |
//! | `exit_not`           | the process exited by itself with none of these codes        | `exit-code` |
//! | `schema`             | stdout is one JSON document valid against `envelope`, `incomplete`, `manifest` (bare or as `data`), `job-descriptor` (its `data`), or all listed | `schema`, `stdout-not-json`, `stdout-not-utf8` |
//! | `json`               | `[{ pointer, equals \| not_equals \| matches \| present \| less_than \| at_least \| greater_than }]` on the response; the comparisons take a number or a template giving one (`"{@call/data/progress/done}"`) | `json-pointer` |
//! | `elapsed_max` / `elapsed_min` | the step's duration is within the bound            | `elapsed` |
//! | `pipes_released`     | stdout and stderr hit end-of-file within 1 s of the exit     | `pipes-released` |
//! | `progress_monotonic` | `data.progress.done` never decreases across the scenario's responses, per `data.job_id` | `progress-monotonic` |
//! | `matches_calibrated` | after redaction, `ok`, `data`, `error` and the exit code equal the role's `--budget 0` response | `calibrated-equality` |
//! | `same_response_as`   | the same, against an earlier step's last response (a step of several probes or copies: each against the one of the same rank, when that step has as many) | `same-response` |
//! | `continues_verbatim` | `data.continue_command`, split into words by `sh`, is the very invocation (an `--idempotency-key <k>` added at most) | `continue-command` |
//! | `same`               | these pointers have one value across all responses of the step (copies, hops) | `same-value` |
//! | `differs_from`       | `[{ step, pointer }]`: the string differs from that step's in ≥ 8 positions (random ids, not counters) | `unlike` |
//! | `no_ansi`            | these streams (`stdout`, `stderr`) hold no ANSI escape       | `ansi` |
//! | `no_prose`           | stdout is empty or one JSON document (help and prose go to stderr) | `prose` |
//! | `envelope`           | stdout is one valid response envelope: `required`; `or-empty` also passes an empty stdout (`--help`); `or-bare-manifest` also passes a bare manifest valid against the manifest schema when the step ran the manifest command (CONTRACT §2; an advisory note says the spec kit would refuse it) | `schema`, `stdout-not-json`, `stdout-not-utf8` |
//! | `exit_matches_meta`  | when stdout is a valid envelope, its `meta.exit_code` is the process's exit code (no valid envelope is `envelope`'s to report, as in the kit) | `exit-code` |
//! | `warnings`           | each code is the `code` of a `warnings` entry in at least one response of the step | `warning` |
//! | `stream`             | stdout is a REQ-O-004 stream ([`stream`]): one JSON object a line, heartbeats ordinary, exactly one terminal line last (a `_summary`, exit 0; or a valid error envelope whose `meta.exit_code` is the exit), numbered `_seq` 1, 2, ... with `_count` / `meta.items_emitted` to match, or no `_seq` at all; one finding per broken rule, with its line | `stream` |
//! | `same_stdout_as`     | stdout is byte for byte that step's last stdout              | `same-stdout` |
//! | `stdout_differs_from`| stdout differs from that step's                              | `stdout-differs` |
//! | `same_data_as`       | the response's `/data` equals that step's                    | `same-data` |
//! | `data_differs_from`  | the response's `/data` differs from that step's              | `data-differs` |
//! | `manifest_rules`     | the manifest keeps these registration rules: `detach-or-resume`, `incomplete-entry`, `incomplete-entry-shape`, `not-async-or-streaming`, `resumable-writer-has-key`, `budget-flag-only-when-interruptible` | `manifest-rule` |
//!
//! Beside them the runner reports `timeout` (a step outlived its limit and was killed),
//! `continue-loop` (the hop limit was reached), `shell` (a `shell` step failed),
//! `missing-command` (no `continue_command` / `cancel_command` to run), `stream-signal` (a
//! stream ended before its signal was sent), `stream-deadline` (a stream killed at its
//! deadline), `kill-worker` (no worker found) and `leaked-process` (a process of the scenario outlived it and its cancels; see [`sandbox`] for how they are found).
//!
//! ## Calibrated comparison and redaction
//!
//! Responses are compared after the rules of [`redact`]: sandbox paths, durations,
//! timestamps, job ids, idempotency keys, etags and pids are replaced by placeholders, so two
//! runs of the same work compare equal.

pub mod baseline;
pub mod calibrate;
pub mod checks;
pub mod cli;
pub mod discover;
pub mod embedded;
pub mod event;
pub mod exec;
pub mod exit;
pub mod init;
pub mod interrupt;
pub mod levels;
pub mod observe;
pub mod outcome;
pub mod plan;
pub mod prepare;
pub mod profile;
pub mod redact;
pub mod report;
pub mod run;
pub mod sandbox;
pub mod scenario;
pub mod schemas;
pub mod snapshot;
pub mod step;
pub mod stream;
pub mod summary;
pub mod tool;
