//! `reftool`: parse, run, exit.

fn main() -> std::process::ExitCode {
    eprintln!("reftool: not built yet");
    std::process::ExitCode::from(1)
}
