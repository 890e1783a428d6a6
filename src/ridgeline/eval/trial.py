"""One trial: sandbox -> agent loop -> verifier in a fresh sandbox -> reward -> records on disk.

Layout of a trial directory::

    trial.json            the trial record (written last, atomically: its presence means "finished")
    trajectory.json       every step (see ridgeline.agent.trajectory)
    logs/agent/           the agent's /logs/agent (answer.txt for question tasks)
    logs/verifier/        /logs/verifier: reward.txt or reward.json, test-stdout.txt, test-stderr.txt

Statuses: the agent loop's status, except that an infrastructure failure anywhere (sandbox, model
service, a task whose setup or verifier is broken) is ``infra_fail``, which is never scored.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path
from typing import Any

from ridgeline.agent import Status, Trajectory, run_agent
from ridgeline.errors import SandboxError, TaskSetupError, VerifierError
from ridgeline.policies import PolicyConfig, build_policy
from ridgeline.policies.oracle import SOLUTION_MOUNT
from ridgeline.rewards.outcome import outcome_reward
from ridgeline.sandbox import create
from ridgeline.sandbox.base import Bind
from ridgeline.sandbox.prepare import run_setup, task_sandbox_config
from ridgeline.tasks.loader import Task
from ridgeline.verify import run_verifier

#: A trial passes when its outcome reward reaches this value.
PASS_THRESHOLD = 1.0


def _write_json(path: Path, data: Any) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(json.dumps(data, indent=2, sort_keys=True, default=str))
    os.replace(tmp, path)


def run_trial(
    task: Task,
    policy_config: PolicyConfig,
    trial_dir: Path,
    *,
    attempt: int = 0,
    run_root: Path | None = None,
) -> dict[str, Any]:
    """Run one trial of ``policy_config`` on ``task`` in ``trial_dir`` and return its record."""
    if trial_dir.exists():
        shutil.rmtree(trial_dir)  # an unfinished earlier attempt: start clean
    agent_logs = trial_dir / "logs" / "agent"
    verifier_logs = trial_dir / "logs" / "verifier"
    agent_logs.mkdir(parents=True)
    verifier_logs.mkdir(parents=True)
    from ridgeline.sandbox.bwrap import SANDBOX_UID

    for d in (agent_logs, verifier_logs):
        if os.geteuid() == 0:
            os.chown(d, SANDBOX_UID, SANDBOX_UID)

    started = time.perf_counter()
    policy = build_policy(policy_config)
    binds: tuple[Bind, ...] = ()
    if getattr(policy, "needs_solution", False):
        binds = (Bind(source=task.solution_dir, target=SOLUTION_MOUNT),)
    cfg = task_sandbox_config(task, agent_logs=agent_logs, verifier_logs=verifier_logs, binds=binds)
    error: str | None = None
    trajectory: Trajectory | None = None
    status: Status
    reward: float | None = None
    rewards: dict[str, float] = {}
    snapshot = None
    timings: dict[str, float] = {}
    try:
        sandbox = create(cfg)
        try:
            t = time.perf_counter()
            run_setup(task, sandbox)
            timings["setup_s"] = time.perf_counter() - t
            t = time.perf_counter()
            result = run_agent(task, sandbox, policy, policy_config=policy_config)
            timings["agent_s"] = time.perf_counter() - t
            trajectory, status = result.trajectory, result.status
            if status is not Status.INFRA_FAIL:
                snapshot = sandbox.snapshot()
        finally:
            sandbox.close()  # every agent process is gone before the verifier starts
            policy.close()
        if snapshot is not None:
            t = time.perf_counter()
            v = run_verifier(task, snapshot, verifier_logs, agent_logs)
            timings["verify_s"] = time.perf_counter() - t
            timings["verifier_command_s"] = v.duration_s
            rewards = v.rewards
            reward = v.reward if v.reward is not None else outcome_reward(v.rewards)
    except (SandboxError, TaskSetupError, VerifierError) as exc:
        status, error = Status.INFRA_FAIL, f"{type(exc).__name__}: {exc}"
    wall = time.perf_counter() - started

    if trajectory is None:
        trajectory = Trajectory(
            task=task.name,
            task_hash=task.hash,
            task_path=str(task.path),
            domain=task.domain,
            policy=policy_config.label(),
            policy_digest=policy_config.digest(),
        )
    trajectory.status = status
    trajectory.reward = reward
    trajectory.rewards = rewards
    if error:
        trajectory.error = error
    trajectory.save(trial_dir / "trajectory.json")

    usage = trajectory.usage
    passed = None if status is Status.INFRA_FAIL or reward is None else reward >= PASS_THRESHOLD
    rel = (
        os.path.relpath(trial_dir / "trajectory.json", run_root)
        if run_root
        else str(trial_dir / "trajectory.json")
    )
    meta = task.spec.metadata
    record: dict[str, Any] = {
        "task": task.name,
        "task_hash": task.hash,
        "task_path": str(task.path),
        "domain": task.domain,
        "difficulty": task.spec.difficulty,
        "required_steps": meta.get("required_steps") if isinstance(meta.get("required_steps"), int) else None,
        "attempt": attempt,
        "policy_digest": policy_config.digest(),
        "status": str(status),
        "reward": reward,
        "rewards": rewards,
        "passed": passed,
        "steps": trajectory.n_model_calls,
        "wall_s": round(wall, 4),
        "tokens": {
            "prompt": usage.prompt_tokens,
            "cached": usage.cached_tokens,
            "completion": usage.completion_tokens,
        },
        "cost_usd": trajectory.cost_usd,
        "tool_calls": trajectory.tool_stats.calls,
        "invalid_tool_calls": trajectory.tool_stats.invalid,
        "error": error or trajectory.error,
        # Where the time went: model calls, commands the agent ran, the verifier's test command;
        # the rest of wall_s is the harness's own overhead (sandboxes, files, bookkeeping).
        "timings": {
            **{k: round(v, 4) for k, v in timings.items()},
            "model_s": round(sum(s.model_s or 0.0 for s in trajectory.steps), 4),
            "tool_s": round(sum(s.tool_s or 0.0 for s in trajectory.steps), 4),
        },
        "trajectory": rel,
    }
    _write_json(trial_dir / "trial.json", record)
    return record
