//! Faults in the bytes: stdin read before anything runs, the bytes and exit status written,
//! and a stream's lines filtered on their way to stdout.

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal, Read, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::thread::JoinHandle;
use std::time::Duration;

use reftool::framework::Finished;
use reftool::framework::exit::Exit;
use serde_json::{Value, json};

use crate::Fault;
use crate::invocation::Call;

/// Whether the call is `version`, the read probe the stdin faults spoil (not `manifest`:
/// conform reads it in nearly every scenario, with stdin closed).
fn is_read_probe(call: &Call<'_>) -> bool {
    call.argv.get(1).is_some_and(|a| a == "version")
}

/// The stdin faults of the read probes, before anything runs; `Some(exit)` ends the process at
/// once with that status, writing nothing.
pub fn before_run(fault: Fault, call: &Call<'_>) -> Option<u8> {
    if !is_read_probe(call) || std::io::stdin().is_terminal() {
        return None;
    }
    if fault == Fault::ReadProbesWaitForStdin {
        let mut input = Vec::new();
        let _ = std::io::stdin().lock().read_to_end(&mut input);
    }
    // `/dev/null` (what a closed stdin usually is) is a character device, a pipe is not.
    let stdin_is_null =
        std::fs::metadata("/dev/stdin").is_ok_and(|m| m.file_type().is_char_device());
    if fault == Fault::ReadProbesNeedInput && stdin_is_null {
        // Every read of /dev/null is an empty answer: ask again, for ever (the caller's limit
        // ends it).
        loop {
            let mut answer = [0_u8; 1];
            if std::io::stdin().lock().read(&mut answer).is_ok_and(|n| n > 0) {
                return Some(Exit::GENERAL_ERROR.code());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    None
}

/// The faults in what is written: the exit status, stray bytes, a missing summary line.
pub fn tamper(fault: Fault, call: &Call<'_>, mut finished: Finished) -> Finished {
    let Finished { stdout, stderr, exit } = &mut finished;
    match fault {
        // The envelope still says 14.
        Fault::ExitZeroOnIncomplete if *exit == Exit::INCOMPLETE.code() => *exit = 0,
        // 127 is a shell's code (command not found).
        Fault::ArgErrorExits127 if *exit == Exit::ARG_ERROR.code() => *exit = 127,
        Fault::VersionPrintsProgressFirst if is_read_probe(call) => {
            let mut first = b"{\"progress\":{\"done\":1}}\n".to_vec();
            first.append(stdout);
            *stdout = first;
        }
        Fault::AnsiOnStdout if is_read_probe(call) => stdout.extend_from_slice(b"\x1b[0m"),
        Fault::NoColorIgnored => stderr.push_str("\x1b[2mreftool\x1b[0m\n"),
        // A successful stream's last line is its summary.
        Fault::StreamWithoutSummary if call.streams() && *exit == 0 => stdout.clear(),
        _ => {}
    }
    finished
}

/// [`Fault::StreamSeqSkips`]: stdout passes through a thread that adds one to every `_seq`
/// from 3 on, so the sequence goes 1, 2, 4, 5, ...
pub struct SeqFilter {
    stdout: OwnedFd,
    thread: JoinHandle<()>,
}

impl SeqFilter {
    /// The filter, when `fault` is [`Fault::StreamSeqSkips`] and the call streams.
    pub fn install_for(fault: Fault, call: &Call<'_>) -> Option<SeqFilter> {
        (fault == Fault::StreamSeqSkips && call.streams()).then(Self::install).flatten()
    }

    fn install() -> Option<SeqFilter> {
        let stdout = nix::unistd::dup(std::io::stdout().as_fd()).ok()?;
        let mut out = File::from(nix::unistd::dup(stdout.as_fd()).ok()?);
        let (read, write) = nix::unistd::pipe().ok()?;
        nix::unistd::dup2_stdout(&write).ok()?;
        drop(write);
        let thread = std::thread::spawn(move || {
            for line in BufReader::new(File::from(read)).lines() {
                let Ok(line) = line else { break };
                let _ = writeln!(out, "{}", skip_three(&line));
                let _ = out.flush();
            }
        });
        Some(SeqFilter { stdout, thread })
    }

    /// Gives stdout back (which ends the filter's input) and waits until the filter wrote all.
    pub fn finish(self) {
        let _ = std::io::stdout().flush();
        let _ = nix::unistd::dup2_stdout(&self.stdout);
        let _ = self.thread.join();
    }
}

/// A stream line with its `_seq` from 3 on one higher.
fn skip_three(line: &str) -> String {
    let Ok(Value::Object(mut item)) = serde_json::from_str::<Value>(line) else {
        return line.to_owned();
    };
    match item.get("_seq").and_then(Value::as_u64) {
        Some(seq) if seq >= 3 => {
            item.insert("_seq".into(), json!(seq + 1));
            Value::Object(item).to_string()
        }
        _ => line.to_owned(),
    }
}
