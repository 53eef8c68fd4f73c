//! The agent's side of a handoff: running `data.continue_command` verbatim while it exits 14,
//! and running `data.cancel_command`, both through `sh -c` as an agent would.

use std::ffi::OsString;
use std::time::{Duration, Instant};

use super::{Conditions, DEFAULT_MAX_HOPS, INCOMPLETE, Premise, ScenarioState, StepResult, Stop};
use crate::checks;
use crate::exec::{self, Invocation, Program};
use crate::observe::Observation;
use crate::outcome::FindingKind;
use crate::outcome::{Finding, millis};
use crate::scenario::{RunStep, ShellStep};

/// The longest a continue step's `watch` run may take: the spec's cadence and the slack.
const WATCH_HOLD: &str = "{cadence} + {slack}";

/// The shortest a hop is taken to last, whatever the tool's measured start-up.
const MIN_HOP: Duration = Duration::from_millis(20);

/// How many hops a continue loop without `max_hops` allows: enough to hop for the whole
/// `window` (the loop's time allowance, derived from the calibrated duration D) as fast as the
/// tool can answer, and never fewer than [`DEFAULT_MAX_HOPS`].
///
/// A hop answering 14 lasts at least the tool's start-up, and at least its budget when that is
/// longer (a tool counting its budget from its own start answers at the later of the two); so
/// a hop's budget never makes it shorter than the start-up, and the start-up alone bounds how
/// many fit. It is halved, since a later process may start faster than the one measured at
/// discovery. A fixed count would run out for a tool whose start-up eats a small budget, each
/// hop then doing a sliver of work.
pub(super) fn hop_limit(window: Duration, startup: Duration) -> u32 {
    let per_hop = (startup / 2).max(MIN_HOP);
    let hops = window.as_millis().div_ceil(per_hop.as_millis());
    u32::try_from(hops).unwrap_or(u32::MAX).max(DEFAULT_MAX_HOPS)
}

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

    pub(super) fn run_continue(&mut self, c: &ShellStep) -> StepResult {
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
            return self.judge_step(
                &c.name,
                Conditions::premise(c.premise.as_ref()),
                &c.expect,
                &[last],
                None,
            );
        }
        let mut line = match self.command_from(&c.name, &c.from, "/data/continue_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        // The step's limit bounds the whole loop, not only each hop: a job that answers 14
        // every few seconds for ever (a stalled job whose watchdog never fires) is judged when
        // the limit is up, not after as many hops as could fit. No hop starts past it; the
        // one running then ends on its own (each hop is held to its budget anyway).
        let window = self.limit(c.limit.as_deref())?;
        let started = Instant::now();
        let max_hops = match c.max_hops {
            Some(hops) => hops,
            None => hop_limit(window, self.subject.startup),
        };
        let mut indices = Vec::new();
        let mut watched = std::collections::BTreeSet::new();
        let mut hops = 0;
        while hops < max_hops {
            if started.elapsed() >= window {
                break;
            }
            hops += 1;
            let inv = self.shell_invocation(c, line.clone())?;
            super::stop::gate()?;
            let outcome = exec::run(&inv)?;
            let i = self.record(&c.name, format!("{}#{hops}", c.name), &inv, outcome);
            indices.push(i);
            // Every hop holds its caller at most as long as its budget allows.
            if let Some(finding) = self.held_too_long(i) {
                return Ok(vec![finding]);
            }
            if self.observations[i].exit_code() != Some(INCOMPLETE) {
                match self.misses_premise(&c.name, c.premise.as_ref(), i, None) {
                    Premise::Met => {}
                    Premise::MissedLegally(reason) => return Err(Stop::Skip(reason)),
                    Premise::MissedIllegally(findings) => return Ok(findings),
                }
                let mut findings = self.check_one(&c.expect, &self.observations[i]);
                let all: Vec<&Observation> =
                    indices.iter().map(|&i| &self.observations[i]).collect();
                let mut facts = self.step_facts(&c.name, &c.expect, &indices);
                facts.watched = watched;
                findings.extend(checks::check_all(&c.expect, &c.name, &all, &facts));
                return Ok(findings);
            }
            // What the job itself reports beside the hop's answer: a run of the tool. It is an
            // observation, not the criterion: how long a `job status` may hold its caller is
            // judged by its own scenario (job-status-never-waits), and a slow look only
            // shortens the stretches the window checks measure, so it may take up to the
            // spec's cadence before it is a finding (dozens of looks under load would
            // otherwise fail a correct tool on one slow start-up).
            if !c.watch.is_empty() {
                let expect = crate::scenario::Expect {
                    elapsed_max: Some(WATCH_HOLD.to_owned()),
                    ..crate::scenario::Expect::default()
                };
                let watch = RunStep {
                    name: format!("{}-watch#{hops}", c.name),
                    args: c.watch.clone(),
                    expect,
                    ..RunStep::default()
                };
                let findings = self.run_watch(&watch)?;
                if !findings.is_empty() {
                    return Ok(findings);
                }
                if let Some(&w) = self.last.get(&watch.name) {
                    watched.insert(indices.len());
                    indices.push(w);
                }
            }
            line = match self.command_from(&c.name, &c.name, "/data/continue_command") {
                Ok(l) => l,
                Err(f) => return Ok(vec![f]),
            };
        }
        let took = millis(started.elapsed());
        Ok(vec![
            Finding::new(
                FindingKind::ContinueLoop,
                format!(
                    "the work did not end within {hops} continuations over {took} ms (the step allows {} ms and {max_hops} continuations)",
                    millis(window)
                ),
            )
            .expected(format!(
                "an exit other than 14 within {} ms of running continue_command",
                millis(window)
            ))
            .actual(format!("still 14 after {hops} runs and {took} ms: {line}"))
            .at_step(c.name.clone()),
        ])
    }

    pub(super) fn run_cancel(&mut self, c: &ShellStep) -> StepResult {
        let line = match self.command_from(&c.name, &c.from, "/data/cancel_command") {
            Ok(l) => l,
            Err(f) => return Ok(vec![f]),
        };
        let inv = self.shell_invocation(c, line)?;
        super::stop::gate()?;
        let outcome = exec::run(&inv)?;
        let i = self.record(&c.name, c.name.clone(), &inv, outcome);
        self.judge_step(
            &c.name,
            Conditions::premise(c.premise.as_ref()),
            &c.expect,
            &[i],
            Some(&c.from),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hop_limit_covers_the_work_at_the_pace_the_tool_can_answer() {
        let ms = Duration::from_millis;
        // A 2.5 s work behind a 40 ms start-up: hops answering as the tool starts must be able
        // to cover the work (100 of them would not), within the 3 x D + 30 s allowance.
        let hops = hop_limit(ms(3 * 2500 + 30_000), ms(40));
        assert!(ms(40) / 2 * hops >= ms(2500), "{hops}");
        assert_eq!(hops, 1875);
        // A slow start-up never lowers it below the default.
        assert_eq!(hop_limit(ms(30_000), ms(5000)), DEFAULT_MAX_HOPS);
        // A start-up measured as nothing is taken as the smallest hop.
        assert_eq!(hop_limit(ms(30_000), Duration::ZERO), 1500);
    }
}
