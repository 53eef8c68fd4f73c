//! The agent's side of a handoff: running `data.continue_command` verbatim while it exits 14,
//! and running `data.cancel_command`, both through `sh -c` as an agent would.

use std::ffi::OsString;

use super::{DEFAULT_MAX_HOPS, INCOMPLETE, ScenarioState};
use crate::checks;
use crate::exec::{self, Invocation, Program};
use crate::observe::Observation;
use crate::outcome::Finding;
use crate::outcome::FindingKind;
use crate::scenario::ShellStep;

impl ScenarioState<'_> {
    /// The command line at `pointer` of `from`'s last response, or a finding.
    fn command_from(&self, step: &str, from: &str, pointer: &str) -> Result<String, Finding> {
        let obs = self.last_of(from).ok_or_else(|| {
            Finding::new(FindingKind::MissingCommand, format!("step `{from}` produced no response"))
                .at_step(step)
        })?;
        match obs.str_at(pointer) {
            Some(line) if !line.trim().is_empty() => Ok(line.to_owned()),
            _ => Err(Finding::new(
                FindingKind::MissingCommand,
                format!("the last response of step `{from}` has no `{pointer}`"),
            )
            .expected(format!("a non-empty string at `{pointer}`"))
            .actual(obs.record.stdout.text.chars().take(300).collect::<String>())
            .at_step(step)),
        }
    }

    fn shell_invocation(&mut self, c: &ShellStep, line: String) -> Result<Invocation, String> {
        let mut env = self.step_env.get(&c.from).cloned().unwrap_or_else(|| self.base_env.clone());
        for (k, v) in &c.env {
            env.insert(k.into(), self.text(v)?.into());
        }
        for k in &c.env_remove {
            env.remove(&OsString::from(k));
        }
        let mut inv = Invocation::new(Program::Shell(line), env, self.work.clone());
        inv.timeout = self.limit(c.limit.as_deref())?;
        let role = self.step_role.get(&c.from).cloned().flatten();
        self.step_env.insert(c.name.clone(), inv.env.clone());
        self.step_role.insert(c.name.clone(), role.clone());
        self.current_role = role;
        Ok(inv)
    }

    pub(super) fn run_continue(&mut self, c: &ShellStep) -> Result<Vec<Finding>, String> {
        // The agent's loop runs while the exit is 14; when `from` already ended otherwise,
        // there is nothing to continue and its response is the one to judge.
        if let Some(&last) = self.last.get(&c.from)
            && self.observations[last].exit_code() != Some(INCOMPLETE)
        {
            self.step_env
                .insert(c.name.clone(), self.step_env.get(&c.from).cloned().unwrap_or_default());
            let role = self.step_role.get(&c.from).cloned().flatten();
            self.step_role.insert(c.name.clone(), role.clone());
            self.current_role = role;
            self.last.insert(c.name.clone(), last);
            return Ok(self.judge(&c.name, &c.expect, &[last]));
        }
        let mut line = match self.command_from(&c.name, &c.from, "/data/continue_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        let max_hops = c.max_hops.unwrap_or(DEFAULT_MAX_HOPS);
        let mut indices = Vec::new();
        for hop in 1..=max_hops {
            let inv = self.shell_invocation(c, line.clone())?;
            crate::interrupt::gate()?;
            let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
            let i = self.record(&c.name, format!("{}#{hop}", c.name), &inv, outcome);
            indices.push(i);
            if self.observations[i].exit_code() != Some(INCOMPLETE) {
                let mut findings = self.check_one(&c.expect, &self.observations[i]);
                let all: Vec<&Observation> =
                    indices.iter().map(|&i| &self.observations[i]).collect();
                findings.extend(checks::check_all(&c.expect, &c.name, &all));
                return Ok(findings);
            }
            line = match self.command_from(&c.name, &c.name, "/data/continue_command") {
                Ok(l) => l,
                Err(f) => return Ok(vec![f]),
            };
        }
        Ok(vec![
            Finding::new(
                FindingKind::ContinueLoop,
                format!("the work did not end within {max_hops} continuations"),
            )
            .expected(format!("an exit other than 14 within {max_hops} runs of continue_command"))
            .actual(format!("still 14 after {max_hops}: {line}"))
            .at_step(c.name.clone()),
        ])
    }

    pub(super) fn run_cancel(&mut self, c: &ShellStep) -> Result<Vec<Finding>, String> {
        let line = match self.command_from(&c.name, &c.from, "/data/cancel_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        let inv = self.shell_invocation(c, line)?;
        crate::interrupt::gate()?;
        let outcome = exec::run(&inv).map_err(|e| e.to_string())?;
        let i = self.record(&c.name, c.name.clone(), &inv, outcome);
        Ok(self.judge(&c.name, &c.expect, &[i]))
    }
}
