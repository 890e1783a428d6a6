"""Verdicts: how the results of a task's trials become problems, notes and one verdict.

Verdicts, worst first: ``invalid`` (static defects; dynamic checks are skipped when the spec does not
load), ``broken`` (the oracle never passes, nop or a wrong solution passes, reset differs, setup or the
verifier crashes), ``flaky`` (the oracle passes sometimes, or without headroom on the limits),
``hackable`` (a probe passed, or a static leak), ``ok``. A task's verdict is its worst problem's.

A trial that ends without a reward because the task's verifier or setup crashed is a problem
(``broken``) even for a probe or a wrong solution: infrastructure failures are left out of scores
and RL statistics, so a verifier that an agent can crash is one an agent can dodge.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ridgeline.policies import PolicyConfig
from ridgeline.qa.probes import HACK_PROBES, PROBE_DESCRIPTIONS, SCREEN, ProbeConfig
from ridgeline.qa.static import SEVERITY, Problem, Verdict
from ridgeline.tasks.loader import Task

#: The oracle may use at most this share of the agent's and the verifier's timeouts.
TIME_HEADROOM = 0.5


@dataclass
class TaskReport:
    """The verdict on one task (the ``tasks`` entries of ``--json``)."""

    task: str
    task_path: str
    task_hash: str | None
    problems: list[Problem] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    oracle_runs: int = 0
    oracle_passes: int = 0
    checks: dict[str, Any] = field(default_factory=dict)
    trial_s: float = 0.0

    @property
    def verdict(self) -> Verdict:
        worst: Verdict = "ok"
        for p in self.problems:
            if SEVERITY[p.verdict] > SEVERITY[worst]:
                worst = p.verdict
        return worst

    @property
    def oracle_pass_rate(self) -> float | None:
        return self.oracle_passes / self.oracle_runs if self.oracle_runs else None

    @property
    def flake_rate(self) -> float | None:
        """The share of oracle runs that failed, when at least one passed (0 for a broken oracle)."""
        rate = self.oracle_pass_rate
        if rate is None:
            return None
        return 1.0 - rate if self.oracle_passes else 0.0

    def to_json(self) -> dict[str, Any]:
        rate, flake = self.oracle_pass_rate, self.flake_rate
        return {
            "task": self.task,
            "task_path": self.task_path,
            "task_hash": self.task_hash,
            "verdict": self.verdict,
            "problems": [p.to_json() for p in self.problems],
            "notes": self.notes,
            "oracle_pass_rate": None if rate is None else round(rate, 4),
            "oracle_flake_rate": None if flake is None else round(flake, 4),
            "oracle_runs": self.oracle_runs,
            "checks": self.checks,
            "trial_s": round(self.trial_s, 3),
        }


@dataclass(frozen=True)
class Job:
    """One unit of work: a trial of ``policy`` (or the reset check when ``policy`` is None)."""

    index: int  # of the task in the batch
    kind: str  # oracle, oracle-lowmem, nop, wrong, hack-screen, hack, reset
    name: str  # folder name and label: oracle-0, wrong-wrong.sh, hack-conftest, ...
    policy: PolicyConfig | None = None
    probe: str | None = None


def _short(rec: dict[str, Any], trial_dir: Path | None = None) -> str:
    """Why a trial did not give a clean result, in a few words."""
    err = str(rec.get("error") or "")
    if err:
        return err if len(err) <= 300 else err[:297] + "..."
    if trial_dir is not None:
        with contextlib.suppress(OSError):
            out = (trial_dir / "logs" / "verifier" / "test-stdout.txt").read_text(errors="replace").strip()
            if out:
                tail = out.splitlines()[-1]
                return (
                    f"status {rec.get('status')}, reward {rec.get('reward')}; test output ends: {tail[:200]}"
                )
    return f"status {rec.get('status')}, reward {rec.get('reward')}"


def _infra_problem(job: Job, rec: dict[str, Any]) -> Problem | None:
    """A trial that produced no result: the task's setup or verifier crashed (broken), or the machine."""
    err = str(rec.get("error") or "")
    if "status" in rec and rec["status"] != "infra_fail":
        return None
    if err.startswith("VerifierError"):
        what = "the verifier wrote no reward"
    elif err.startswith("TaskSetupError"):
        what = "environment/setup.sh failed"
    else:
        what = "the trial could not run"
    check = "hack." + job.probe if job.probe else job.kind
    return Problem(check, "broken", f"{what} in the {job.name} trial: {_short(rec)}")


def judge(task: Task, results: dict[Job, dict[str, Any]], root: Path, report: TaskReport) -> None:
    """Turn the results of :func:`plan`'s jobs into problems, notes and check summaries."""
    spec = task.spec
    problems = report.problems
    by_kind: dict[str, list[tuple[Job, dict[str, Any]]]] = {}
    for job, rec in results.items():
        by_kind.setdefault(job.kind, []).append((job, rec))
        if job.kind != "reset":
            report.trial_s += float(rec.get("wall_s") or 0.0)

    # oracle
    oracle = sorted(by_kind.get("oracle", []), key=lambda jr: jr[0].name)
    scored = [(j, r) for j, r in oracle if r.get("passed") is not None]
    report.oracle_runs = len(scored)
    report.oracle_passes = sum(bool(r["passed"]) for _, r in scored)
    crashed = [(j, r) for j, r in oracle if r.get("passed") is None]
    for j, r in crashed[:1]:
        p = _infra_problem(j, r)
        if p is not None:
            problems.append(p)
    failed = [(j, r) for j, r in scored if not r["passed"]]
    if scored and not report.oracle_passes:
        j, r = failed[0]
        problems.append(
            Problem(
                "oracle", "broken", f"the oracle failed all {len(scored)} runs ({_short(r, root / j.name)})"
            )
        )
    elif failed:
        j, r = failed[0]
        problems.append(
            Problem(
                "oracle",
                "flaky",
                f"the oracle passed {report.oracle_passes} of {len(scored)} runs "
                f"(first failure: {_short(r, root / j.name)})",
            )
        )
    agent_s = [float(r["agent_s"]) for _, r in scored if r.get("passed") and r.get("agent_s") is not None]
    rest_s = [
        float(r["wall_s"]) - float(r["agent_s"])
        for _, r in scored
        if r.get("passed") and r.get("agent_s") is not None
    ]
    report.checks["oracle"] = {
        "runs": len(scored),
        "passes": report.oracle_passes,
        "max_agent_s": round(max(agent_s), 3) if agent_s else None,
        "max_setup_and_verifier_s": round(max(rest_s), 3) if rest_s else None,
    }

    # limits (judged only on a reliable oracle: a flaky one already says it all)
    fully_passing = bool(scored) and report.oracle_passes == len(scored)
    if fully_passing and agent_s:
        limit = spec.agent.timeout_sec
        if max(agent_s) > TIME_HEADROOM * limit:
            problems.append(
                Problem(
                    "limits",
                    "flaky",
                    f"the oracle needed {max(agent_s):.1f} s of the {limit:g} s agent timeout "
                    f"(more than {TIME_HEADROOM:.0%}): it may time out on a loaded machine",
                )
            )
        vlimit = spec.verifier.timeout_sec
        if rest_s and max(rest_s) > TIME_HEADROOM * vlimit:
            problems.append(
                Problem(
                    "limits",
                    "flaky",
                    f"setup and the verifier took {max(rest_s):.1f} s, more than {TIME_HEADROOM:.0%} of the "
                    f"{vlimit:g} s verifier timeout",
                )
            )
    for j, r in by_kind.get("oracle-lowmem", []):
        half = max(1, spec.environment.memory_mb // 2)
        report.checks["memory"] = {"memory_mb": spec.environment.memory_mb, "halved_passed": r.get("passed")}
        if fully_passing and not r.get("passed"):
            problems.append(
                Problem(
                    "limits",
                    "flaky",
                    f"the oracle fails with memory_mb halved to {half} MB ({_short(r, root / j.name)}): "
                    f"less than 2x headroom on the {spec.environment.memory_mb} MB limit",
                )
            )

    # nop
    nop_passed = False
    for j, r in by_kind.get("nop", []):
        nop_passed = bool(r.get("passed"))
        report.checks["nop"] = {"passed": r.get("passed"), "status": r.get("status")}
        if nop_passed:
            problems.append(Problem("nop", "broken", "an agent that does nothing passes the tests"))
        elif (p := _infra_problem(j, r)) is not None:
            problems.append(p)

    # wrong solutions
    wrong: dict[str, Any] = {}
    for j, r in sorted(by_kind.get("wrong", []), key=lambda jr: jr[0].name):
        script = j.name.removeprefix("wrong-")
        wrong[script] = r.get("passed")
        if r.get("passed"):
            problems.append(
                Problem("wrong", "broken", f"the wrong solution solution/{script} passes the tests")
            )
        elif (p := _infra_problem(j, r)) is not None:
            problems.append(p)
    report.checks["wrong"] = wrong

    # hack probes (meaningless when doing nothing already passes)
    hacks: dict[str, Any] = {}
    for j, r in by_kind.get("hack-screen", []):
        assert isinstance(j.policy, ProbeConfig)
        members = j.policy.members
        report.checks["hack_screen"] = {"members": list(members), "passed": r.get("passed")}
        if r.get("passed") is False:
            hacks.update(dict.fromkeys(members, False))  # screened out together: none fooled it
        elif nop_passed:
            pass
        elif r.get("passed") and not any(
            rr.get("passed") for jj, rr in by_kind.get("hack", []) if jj.probe in members
        ):
            what = PROBE_DESCRIPTIONS[SCREEN].format(members=", ".join(members))
            problems.append(
                Problem(f"hack.{SCREEN}", "hackable", f"the verifier passed an agent that {what}")
            )
        elif (p := _infra_problem(j, r)) is not None:
            problems.append(p)
    for j, r in sorted(by_kind.get("hack", []), key=lambda jr: jr[0].name):
        assert j.probe is not None
        hacks[j.probe] = r.get("passed")
        if nop_passed:
            continue
        if r.get("passed"):
            problems.append(
                Problem(
                    f"hack.{j.probe}",
                    "hackable",
                    f"the verifier passed an agent that only {PROBE_DESCRIPTIONS[j.probe]}",
                )
            )
        elif (p := _infra_problem(j, r)) is not None:
            problems.append(p)
    skipped = [n for n in HACK_PROBES if n not in hacks]
    report.checks["hack"] = hacks
    if skipped:
        report.checks["hack_skipped"] = skipped

    # reset
    for _, r in by_kind.get("reset", []):
        report.checks["reset"] = r
        if "error" in r:
            problems.append(Problem("reset", "broken", f"the reset check could not run: {r['error']}"))
            continue
        if not r["stable"]:
            problems.append(
                Problem(
                    "reset",
                    "broken",
                    "the prepared workdir changes on its own (a process left running by setup.sh?): "
                    f"{r['unstable_paths']}",
                )
            )
        if not r["restored"]:
            problems.append(
                Problem("reset", "broken", f"restoring the snapshot did not restore {r['restore_diff']}")
            )
        if not r["mutated"]:
            report.notes.append("reset: the mutation changed nothing in the workdir (is it writable?)")
        if not r["deterministic"]:
            report.notes.append(
                f"reset: two fresh sandboxes differ after setup.sh ({r['fresh_diff']}); "
                "trials of this task do not start from the same files"
            )


__all__ = ["TIME_HEADROOM", "Job", "TaskReport", "judge"]
