//! The tool under test as conform invokes it: one program and the arguments that lead every
//! invocation of it (the rest of a profile's `[tool] command`, e.g. `["python3", "cli.py"]`).
//!
//! Every stage that runs the tool (discovery, setup, calibration, steps, clean-up) builds its
//! argv here, so a tool given as an interpreter and a script is run the same way everywhere.

use std::path::{Path, PathBuf};

/// The variable that gives setup commands (of roles and kit probes) the tool's path, so a
/// setup can prepare state with the tool itself (`"$CONFORM_TOOL" migrate --db shop.db`).
pub const TOOL_ENV: &str = "CONFORM_TOOL";

/// The tool and the arguments before every other argument of every invocation of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tool {
    /// The program (absolute when it was given as a path).
    pub path: PathBuf,
    /// Arguments before every other argument.
    pub leading_args: Vec<String>,
}

impl Tool {
    /// A tool invoked with no leading arguments.
    pub fn new(path: PathBuf) -> Self {
        Self { path, leading_args: Vec::new() }
    }

    /// The program and its leading arguments, as words.
    pub fn argv(&self) -> Vec<String> {
        self.argv_at(&self.path)
    }

    /// The same invocation through another path to the program (a link to it).
    pub fn argv_at(&self, program: &Path) -> Vec<String> {
        let mut argv = vec![program.display().to_string()];
        argv.extend(self.leading_args.iter().cloned());
        argv
    }

    /// What setup lines find in [`TOOL_ENV`]: the program itself, or, when the tool has
    /// leading arguments, a small script in `dir` that runs the whole command, so
    /// `"$CONFORM_TOOL" migrate` works either way.
    pub fn setup_program(&self, dir: &Path) -> std::io::Result<PathBuf> {
        if self.leading_args.is_empty() {
            return Ok(self.path.clone());
        }
        let words: Vec<String> =
            self.argv().iter().map(|w| crate::outcome::shell_quote(w)).collect();
        let script = dir.join("conform-tool");
        let body = format!("#!/bin/sh\nexec {} \"$@\"\n", words.join(" "));
        std::fs::write(&script, body)?;
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755))?;
        Ok(script)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leading_arguments_follow_the_program_through_any_path() {
        let tool = Tool { path: "/usr/bin/python3".into(), leading_args: vec!["cli.py".into()] };
        assert_eq!(tool.argv(), ["/usr/bin/python3", "cli.py"]);
        assert_eq!(tool.argv_at(Path::new("/tmp/x/python3")), ["/tmp/x/python3", "cli.py"]);
    }

    #[test]
    fn setup_sees_the_program_itself_or_a_script_running_the_whole_command() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bare = Tool::new("/bin/true".into());
        assert_eq!(bare.setup_program(dir.path()).expect("bare"), Path::new("/bin/true"));
        let tool = Tool { path: "/bin/echo".into(), leading_args: vec!["a b".into()] };
        let script = tool.setup_program(dir.path()).expect("script");
        let out = std::process::Command::new(&script).arg("c").output().expect("run");
        assert_eq!(String::from_utf8_lossy(&out.stdout), "a b c\n");
    }
}
