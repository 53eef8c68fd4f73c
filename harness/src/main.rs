//! `conform`: parse, run, exit.

fn main() -> std::process::ExitCode {
    eprintln!("conform: not built yet");
    std::process::ExitCode::from(1)
}
