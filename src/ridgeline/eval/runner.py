"""``ridgeline eval``: run every task k times with bounded concurrency, resumably.

Output directory::

    run.json              the agent spec, its config digest and k (checked on --resume)
    results.json          summary + trials (rewritten as trials finish, complete at the end)
    trials/<task>__<hash>/<attempt>/   one folder per trial (see ridgeline.eval.trial)

Resume: a trial is finished when its ``trial.json`` exists with the same task hash and policy digest.
``--resume`` reruns everything else — trials never started, trials cut off by Ctrl-C or ``kill -9``,
and infrastructure failures (they are not results) — and never touches a finished trial.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ridgeline.errors import UserError
from ridgeline.eval.metrics import success_by_required_steps, summarize
from ridgeline.eval.trial import _write_json, run_trial
from ridgeline.policies import PolicyConfig
from ridgeline.sandbox.base import close_all
from ridgeline.tasks.loader import Task

RESULTS = "results.json"


@dataclass(frozen=True)
class TrialSpec:
    task: Task
    attempt: int

    def dir(self, root: Path) -> Path:
        short = self.task.hash.split(":")[-1][:8]
        return root / "trials" / f"{self.task.name}__{short}" / str(self.attempt)


class Progress:
    """What the runner reports as trials finish (the CLI draws a progress bar from it)."""

    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.passed = 0
        self.scored = 0
        self.infra = 0
        self.started = time.monotonic()

    def add(self, record: dict[str, Any]) -> None:
        self.done += 1
        if record["status"] == "infra_fail":
            self.infra += 1
        elif record["passed"] is not None:
            self.scored += 1
            self.passed += bool(record["passed"])

    @property
    def pass_rate(self) -> float | None:
        return self.passed / self.scored if self.scored else None


def _load_finished(path: Path, spec: TrialSpec, digest: str) -> dict[str, Any] | None:
    try:
        rec: dict[str, Any] = json.loads((path / "trial.json").read_text())
    except (OSError, ValueError):
        return None
    if rec.get("task_hash") != spec.task.hash or rec.get("policy_digest") != digest:
        return None
    if rec.get("status") == "infra_fail":
        return None
    return rec


def run_eval(
    tasks: list[Task],
    policy_config: PolicyConfig,
    output: Path,
    *,
    k: int = 1,
    concurrency: int = 4,
    resume: bool = False,
    on_trial: Callable[[Progress, dict[str, Any]], None] | None = None,
) -> dict[str, Any]:
    """Run the evaluation and write ``output/results.json``; returns its content.

    Raises:
        UserError: ``output`` holds another run (different agent) or a run and ``resume`` is False.
    """
    if k < 1 or concurrency < 1:
        raise UserError(f"-k and --concurrency must be at least 1 (got k={k}, concurrency={concurrency})")
    digest = policy_config.digest()
    meta = {"agent": policy_config.label(), "policy_digest": digest, "k": k}
    run_file = output / "run.json"
    if run_file.exists():
        old = json.loads(run_file.read_text())
        if not resume:
            raise UserError(
                f"{output}: already holds a run; pass --resume to finish it, or choose another --output"
            )
        if old.get("policy_digest") != digest:
            raise UserError(
                f"{output}: holds a run of agent {old.get('agent')!r} (digest {old.get('policy_digest')}), "
                f"not {meta['agent']!r} ({digest}); resume it with the same --agent or use another --output"
            )
    output.mkdir(parents=True, exist_ok=True)
    _write_json(run_file, meta)

    specs = [TrialSpec(t, a) for t in tasks for a in range(k)]
    records: dict[int, dict[str, Any]] = {}
    todo: list[int] = []
    for i, spec in enumerate(specs):
        rec = _load_finished(spec.dir(output), spec, digest) if resume else None
        if rec is not None:
            records[i] = rec
        else:
            todo.append(i)
    progress = Progress(len(specs))
    for rec in records.values():
        progress.add(rec)
    started = time.monotonic()
    lock = threading.Lock()

    def write_results(final: bool) -> dict[str, Any]:
        trials = [records[i] for i in sorted(records)]
        summary: dict[str, Any] = summarize(trials, k) if trials else {"n_trials": 0}
        if trials:
            summary["success_by_required_steps"] = success_by_required_steps(trials)
        summary["trial_wall_s_total"] = summary.get("wall_s")
        summary["wall_s"] = round(time.monotonic() - started, 3)
        summary["complete"] = final and len(trials) == len(specs)
        data = {**meta, "summary": summary, "trials": trials}
        _write_json(output / RESULTS, data)
        return data

    def one(i: int) -> dict[str, Any]:
        spec = specs[i]
        return run_trial(spec.task, policy_config, spec.dir(output), attempt=spec.attempt, run_root=output)

    last_write = 0.0
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="trial")
    try:
        pending: dict[Future[dict[str, Any]], int] = {pool.submit(one, i): i for i in todo}
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for fut in done:
                i = pending.pop(fut)
                rec = fut.result()
                with lock:
                    records[i] = rec
                    progress.add(rec)
                if on_trial is not None:
                    on_trial(progress, rec)
            if time.monotonic() - last_write > 2.0:
                write_results(final=False)
                last_write = time.monotonic()
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        close_all()  # running trials end now (recorded as infra_fail, rerun by --resume)
        write_results(final=False)
        raise
    pool.shutdown(wait=True)
    return write_results(final=True)
