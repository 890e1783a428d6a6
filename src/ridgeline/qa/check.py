"""``ridgeline check``: environment quality inspection, a verdict per task bound to its content hash.

For each task (see :func:`check_tasks`)::

    static      spec valid, referenced files exist, tests/solution unreachable, the instruction names
                the files the tests read, no network in tests, no host paths   (ridgeline.qa.static)
    oracle      N runs of the reference solution: pass rate and flake rate
    nop         an agent that does nothing must fail
    wrong       each solution/wrong*.sh, run as an agent, must fail
    reset       prepared workdir -> snapshot -> mutate -> restore gives the same tree hash
                                                                                  (ridgeline.qa.reset)
    limits      the oracle uses at most half the agent and verifier timeouts, and still passes with
                memory_mb halved (a run of its own: 2x memory headroom, whatever its peak was)
    hack        eight probes (ridgeline.qa.probes): the verifier must not pass any of them

Every dynamic check is a real trial (:func:`ridgeline.eval.trial.run_trial`), run concurrently; a
trial that fails for infrastructure reasons (a :class:`~ridgeline.errors.SandboxError`) is retried.
The six probes that only plant things (not the two that tamper with the tests' files) first run
together in one *screening* trial; only when it fools the verifier (or crashes it) do they run one by
one, to name the responsible probe. That saves five trials per sound task; ``screen=False`` runs
each probe on its own from the start. How results become a verdict: :mod:`ridgeline.qa.verdict`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import RidgelineError, SandboxUnavailableError, TaskError, UserError
from ridgeline.policies import NopConfig
from ridgeline.policies.oracle import OracleConfig
from ridgeline.qa.probes import (
    HACK_PROBES,
    SCREEN,
    SCREENABLE,
    ProbeConfig,
    probe_applies,
)
from ridgeline.qa.reset import check_reset
from ridgeline.qa.static import SEVERITY, Problem, static_checks
from ridgeline.qa.verdict import Job, TaskReport, judge
from ridgeline.tasks.loader import Task, load_task

#: Infrastructure failures (the sandbox, not the task) are retried this many times per trial.
INFRA_RETRIES = 2
_RETRIED = ("SandboxError", "SandboxClosedError")


@dataclass(frozen=True)
class CheckOptions:
    """How thoroughly to check. ``probes`` names the hack probes to run (default: all)."""

    oracle_runs: int = 5
    concurrency: int = 8
    probes: tuple[str, ...] = tuple(HACK_PROBES)
    #: Run the probes that plant files together in one screening trial first, and one by one only
    #: when the screen fools the verifier (to name the culprits). False runs each one on its own.
    screen: bool = True
    #: Keep every trial's folder here (None: a temporary folder, removed at the end).
    logs_dir: Path | None = None


def _low_memory(task: Task) -> Task:
    env = task.spec.environment
    spec = task.spec.model_copy(
        update={"environment": env.model_copy(update={"memory_mb": max(1, env.memory_mb // 2)})}
    )
    return dataclasses.replace(task, spec=spec)


def plan(task: Task, index: int, options: CheckOptions) -> list[Job]:
    """The trials (and the reset check) that judge ``task``."""
    jobs = [Job(index, "oracle", f"oracle-{i}", OracleConfig()) for i in range(options.oracle_runs)]
    jobs.append(Job(index, "oracle-lowmem", "oracle-lowmem", OracleConfig()))
    jobs.append(Job(index, "nop", "nop", NopConfig()))
    for script in task.wrong_solutions():
        cfg = ProbeConfig(probe="wrong-solution", script=script.name)
        jobs.append(Job(index, "wrong", f"wrong-{script.name}", cfg))
    probes = [n for n in options.probes if probe_applies(n, task)]
    screened = tuple(n for n in SCREENABLE if n in probes) if options.screen else ()
    if len(screened) > 1:
        cfg = ProbeConfig(probe=SCREEN, members=screened)
        jobs.append(Job(index, "hack-screen", f"hack-{SCREEN}", cfg, probe=SCREEN))
    else:
        screened = ()
    for name in probes:
        if name not in screened:
            jobs.append(_hack_job(index, name))
    jobs.append(Job(index, "reset", "reset"))
    return jobs


def _hack_job(index: int, name: str) -> Job:
    return Job(index, "hack", f"hack-{name}", ProbeConfig(probe=name), probe=name)


def follow_ups(job: Job, result: dict[str, Any]) -> list[Job]:
    """Jobs that a finished job calls for: each screened probe on its own when the screen was fooled
    (or crashed), so that the problems name the probe responsible."""
    if job.kind != "hack-screen" or result.get("passed") is False:
        return []
    assert isinstance(job.policy, ProbeConfig)
    return [_hack_job(job.index, name) for name in job.policy.members]


# ----------------------------------------------------------------------------------- running jobs


def _run_trial_job(task: Task, job: Job, trial_dir: Path) -> dict[str, Any]:
    from ridgeline.eval.trial import run_trial

    assert job.policy is not None
    target = _low_memory(task) if job.kind == "oracle-lowmem" else task
    rec: dict[str, Any] = {}
    for _ in range(INFRA_RETRIES + 1):
        rec = run_trial(target, job.policy, trial_dir)
        error = str(rec.get("error") or "")
        if rec["status"] != "infra_fail" or error.split(":")[0] not in _RETRIED:
            break
    rec["agent_s"] = _agent_seconds(trial_dir / "trajectory.json")
    return rec


def _agent_seconds(trajectory: Path) -> float | None:
    try:
        data = json.loads(trajectory.read_text())
    except (OSError, ValueError):
        return None
    wall = data.get("wall_s")
    return float(wall) if isinstance(wall, int | float) else None


def _run_job(task: Task, job: Job, root: Path) -> dict[str, Any]:
    try:
        if job.kind == "reset":
            return check_reset(task)
        return _run_trial_job(task, job, root / job.name)
    except RidgelineError as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}


# ----------------------------------------------------------------------------------- the batch


def _load(path: Path) -> tuple[Task | None, TaskReport]:
    try:
        task = load_task(path)
    except TaskError as exc:
        report = TaskReport(task=path.name, task_path=str(path), task_hash=None)
        report.problems.append(Problem("static.spec", "invalid", exc.detail))
        return None, report
    return task, TaskReport(task=task.name, task_path=str(task.path), task_hash=task.hash)


@contextlib.contextmanager
def _work_root(logs_dir: Path | None) -> Iterator[Path]:
    if logs_dir is not None:
        logs_dir.mkdir(parents=True, exist_ok=True)
        logs_dir.chmod(0o755)
        yield logs_dir
        return
    root = Path(tempfile.mkdtemp(prefix="ridgeline-check-"))
    root.chmod(0o755)  # the sandbox's unprivileged uid must reach the trials' log folders
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


ProgressFn = Callable[[int, int, TaskReport | None], None]


def check_tasks(
    paths: list[Path], options: CheckOptions | None = None, *, on_progress: ProgressFn | None = None
) -> list[TaskReport]:
    """Check every task directory in ``paths`` and return one report per task, in order.

    ``on_progress(done, total, report)`` is called after every job (``report`` is set when a task's
    last job finished).

    Raises:
        UserError: ``oracle_runs`` or ``concurrency`` below 1, or an unknown probe name.
    """
    from ridgeline.sandbox.base import close_all

    opts = options or CheckOptions()
    if opts.oracle_runs < 1 or opts.concurrency < 1:
        raise UserError(
            f"--oracle-runs and --concurrency must be at least 1 (got {opts.oracle_runs}, {opts.concurrency})"
        )
    unknown = [p for p in opts.probes if p not in HACK_PROBES]
    if unknown:
        raise UserError(
            f"unknown hack probe(s) {', '.join(unknown)}; expected some of {', '.join(HACK_PROBES)}"
        )
    loaded = [_load(p) for p in paths]
    reports = [r for _, r in loaded]
    with _work_root(opts.logs_dir) as root:
        roots: list[Path] = []
        jobs: list[Job] = []
        for i, (task, report) in enumerate(loaded):
            short = (report.task_hash or "sha256:invalid").split(":")[-1][:8]
            roots.append(root / f"{i:04d}-{report.task}__{short}")
            if task is None:
                continue
            report.problems.extend(static_checks(task))
            jobs.extend(plan(task, i, opts))
        remaining = [0] * len(loaded)
        for job in jobs:
            remaining[job.index] += 1
        results: list[dict[Job, dict[str, Any]]] = [{} for _ in loaded]
        total, done = len(jobs), 0
        lock = threading.Lock()
        if on_progress is not None:
            on_progress(0, total, None)
        for task, report in loaded:
            if task is None and on_progress is not None:
                on_progress(0, total, report)
        pool = ThreadPoolExecutor(max_workers=opts.concurrency, thread_name_prefix="check")
        pending: dict[Future[dict[str, Any]], Job] = {}

        def submit(job: Job) -> None:
            task = loaded[job.index][0]
            assert task is not None
            pending[pool.submit(_run_job, task, job, roots[job.index])] = job

        try:
            for job in jobs:
                submit(job)
            while pending:
                finished, _ = wait(pending, return_when=FIRST_COMPLETED)
                for fut in finished:
                    job = pending.pop(fut)
                    result = fut.result()
                    if str(result.get("error", "")).startswith("SandboxUnavailableError"):
                        raise SandboxUnavailableError(str(result["error"]).split(": ", 1)[-1])
                    more = follow_ups(job, result)
                    for extra in more:
                        submit(extra)
                    with lock:
                        results[job.index][job] = result
                        remaining[job.index] += len(more) - 1
                        total += len(more)
                        done += 1
                        last = remaining[job.index] == 0
                    report = reports[job.index]
                    if last:
                        task = loaded[job.index][0]
                        assert task is not None
                        judge(task, results[job.index], roots[job.index], report)
                    if on_progress is not None:
                        on_progress(done, total, report if last else None)
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            close_all()
            raise
        pool.shutdown(wait=True)
    return reports


def summarize(reports: list[TaskReport]) -> dict[str, Any]:
    """Counts by verdict."""
    counts = {v: 0 for v in SEVERITY}
    for r in reports:
        counts[r.verdict] += 1
    return {"n_tasks": len(reports), "verdicts": counts, "ok": counts["ok"] == len(reports)}


def results_json(reports: list[TaskReport], options: CheckOptions, wall_s: float) -> dict[str, Any]:
    """The ``--json`` document: ``{"tasks": [...], "summary": {...}}``."""
    summary = summarize(reports)
    summary.update(
        {
            "oracle_runs": options.oracle_runs,
            "concurrency": options.concurrency,
            "probes": list(options.probes),
            "wall_s": round(wall_s, 3),
            "checked_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
    )
    return {"tasks": [r.to_json() for r in reports], "summary": summary}


__all__ = [
    "CheckOptions",
    "TaskReport",
    "check_tasks",
    "follow_ups",
    "judge",
    "plan",
    "results_json",
    "summarize",
]
