//! Running the checks: the registry's entries in order, each against fresh objects on the
//! agent, each verdict with one line of evidence and the numbers of its frames.

use core::time::Duration;

use thiserror::Error;

use super::checks;
use super::harness::{CheckError, Ctx, Env, FrameSink, Timing};
use super::peer::{Peer, PeerError};
use super::proto::{Reply, Request, VERSION};
use crate::wire::Qpn;

/// A check's verdict and its evidence, as the check body returns it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The peer behaved as the rule says.
    Pass(String),
    /// It did not.
    Fail(String),
    /// The rule does not apply to this peer (an optional feature it lacks).
    NotApplicable(String),
}

/// The body of a check.
pub type Body = fn(&mut Ctx<'_>) -> Result<Verdict, CheckError>;

/// Which end of the peer a check exercises.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The peer's responder: the tester sends requests.
    Responder,
    /// The peer's requester: the peer sends (through the agent), the tester responds.
    Requester,
}

/// One conformance check.
#[derive(Debug, Clone, Copy)]
pub struct Check {
    /// Stable identifier, e.g. `resp.psn.seq-nak`.
    pub id: &'static str,
    /// The rule: an IBA Vol. 1 section or compliance statement, or Annex A17.
    pub rule: &'static str,
    /// One line saying what is checked.
    pub title: &'static str,
    /// Which end of the peer it exercises.
    pub role: Role,
    /// The check itself.
    pub body: Body,
}

/// Every check, in the order the suite runs them.
pub fn registry() -> Vec<Check> {
    checks::all()
}

/// A check's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Passed.
    Pass,
    /// Failed, or could not run.
    Fail,
    /// Does not apply.
    NotApplicable,
}

impl Outcome {
    /// `pass`, `fail` or `not_applicable`, as JSON and the expected-results files write it.
    pub const fn name(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::NotApplicable => "not_applicable",
        }
    }
}

/// One check as run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckResult {
    /// The check's id.
    pub id: &'static str,
    /// Its rule.
    pub rule: &'static str,
    /// Its title.
    pub title: &'static str,
    /// The verdict.
    pub outcome: Outcome,
    /// One line of evidence.
    pub evidence: String,
    /// The 1-based numbers of its frames in the suite's capture.
    pub frames: Vec<u64>,
    /// How long it took on the suite's clock.
    pub elapsed: Duration,
}

/// A whole run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Report {
    /// What the agent says it is.
    pub agent: String,
    /// Congestion control at the peer, as the agent reports it.
    pub cc: String,
    /// The results, in run order.
    pub results: Vec<CheckResult>,
    /// Why the suite stopped before the end, if it did.
    pub aborted: Option<String>,
}

impl Report {
    /// Checks with `outcome`.
    pub fn count(&self, outcome: Outcome) -> usize {
        self.results.iter().filter(|r| r.outcome == outcome).count()
    }
}

/// The suite could not start.
#[derive(Debug, Error)]
pub enum SuiteError {
    /// The peer or its agent failed.
    #[error(transparent)]
    Peer(#[from] PeerError),
    /// The agent speaks something else.
    #[error("the agent's greeting {0:?} is not protocol version {VERSION}")]
    Agent(String),
    /// ARP or neighbour discovery for the peer got no answer.
    #[error("{0} does not answer ARP / neighbour discovery")]
    Unresolved(std::net::IpAddr),
}

/// The tester's QP numbers: each check gets its own block, so that a frame from an earlier
/// check can never be taken for one of the current one's.
fn first_qpn(index: usize) -> Qpn {
    Qpn::new(0x10_0000 + (index as u32 % 0x1_0000) * 16)
}

/// Runs `checks` against `peer`; `progress` sees each result as it comes.
pub fn run(
    peer: &mut dyn Peer,
    checks: &[Check],
    timing: Timing,
    sink: &mut dyn FrameSink,
    progress: &mut dyn FnMut(&CheckResult),
) -> Result<Report, SuiteError> {
    let hello = peer.agent(&Request::Hello.to_string())?;
    let (agent, cc) = match Reply::parse(&Request::Hello, &hello) {
        Ok(Ok(Reply::Hello { version, agent, cc })) if version == VERSION => (agent, cc),
        _ => return Err(SuiteError::Agent(hello)),
    };
    let deadline = peer.now() + Duration::from_secs(5).max(timing.response);
    let peer_ip = peer.station().peer();
    let peer_mac = peer
        .resolve_peer(deadline)?
        .ok_or(SuiteError::Unresolved(peer_ip))?;
    let station = peer.station();
    let env = Env {
        tester_mac: station.mac(),
        tester_ip: station.ip(),
        peer_mac,
        peer_ip,
        timing,
        agent: agent.clone(),
        cc: cc.clone(),
    };
    let mut report = Report {
        agent,
        cc,
        results: Vec::new(),
        aborted: None,
    };
    let mut numbers = 0u64;
    for (i, check) in checks.iter().enumerate() {
        if let Some(why) = &report.aborted {
            let r = not_run(check, why);
            progress(&r);
            report.results.push(r);
            continue;
        }
        let start = peer.now();
        let mut ctx = Ctx::new(peer, &env, sink, check.id, &mut numbers, first_qpn(i));
        let verdict = (check.body)(&mut ctx);
        let torn = ctx.teardown();
        let frames = ctx.into_frames();
        let (outcome, evidence) = match verdict {
            Ok(Verdict::Pass(e)) => (Outcome::Pass, e),
            Ok(Verdict::Fail(e)) => (Outcome::Fail, e),
            Ok(Verdict::NotApplicable(e)) => (Outcome::NotApplicable, e),
            Err(CheckError::Peer(e)) => {
                report.aborted = Some(e.to_string());
                (Outcome::Fail, format!("not finished: {e}"))
            }
            Err(e) => (Outcome::Fail, format!("could not run: {e}")),
        };
        if let (Err(e), None) = (torn, &report.aborted) {
            report.aborted = Some(e.to_string());
        }
        let r = CheckResult {
            id: check.id,
            rule: check.rule,
            title: check.title,
            outcome,
            evidence,
            frames,
            elapsed: peer.now().saturating_since(start),
        };
        progress(&r);
        report.results.push(r);
    }
    if report.aborted.is_none() {
        // The agent tears the session down itself on bye or on a closed connection.
        let _ = peer.agent(&Request::Bye.to_string());
    }
    Ok(report)
}

fn not_run(check: &Check, why: &str) -> CheckResult {
    CheckResult {
        id: check.id,
        rule: check.rule,
        title: check.title,
        outcome: Outcome::Fail,
        evidence: format!("not run: {why}"),
        frames: Vec::new(),
        elapsed: Duration::ZERO,
    }
}
