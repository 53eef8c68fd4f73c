//! `conform`: parse, run, exit. Everything else is in the library (`conform::cli`).

fn main() -> std::process::ExitCode {
    std::process::ExitCode::from(conform::cli::main_with(std::env::args_os()))
}
