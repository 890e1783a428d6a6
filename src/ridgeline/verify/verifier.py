"""Run a task's verifier (Harbor's contract) in a fresh sandbox holding the agent's final workspace.

Principle: the verifier is not the agent's. By the time :func:`run_verifier` runs, the agent's sandbox
is closed, so every process the agent started is gone (nothing can rewrite files during
verification). A new sandbox starts from a snapshot of the agent's writable layer with:

* ``tests/`` bound read-only at ``/tests`` (the agent never saw it);
* ``/logs/verifier`` a fresh, writable host directory (read-only during the agent's run, so a reward
  file cannot be planted there);
* ``/logs/agent`` as the agent left it (``answer.txt`` for question tasks).

``bash /tests/test.sh`` runs in the workdir with the task's verifier timeout. The verifier's sandbox is
closed (every process killed) before the reward is read on the host: ``reward.txt`` (one number) or
``reward.json`` (named numbers). A missing or malformed reward file is a
:class:`~ridgeline.errors.VerifierError` naming the file and what was expected.

Not covered: test code runs the agent's code in the same sandbox, and that code can write to
``/logs/verifier`` while the tests run. Both reward files present scores 0 (tampering); a test.sh
should write its reward last, after the agent's code has finished, as the built-in suites do.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from ridgeline.errors import VerifierError
from ridgeline.sandbox.base import Bind, Snapshot
from ridgeline.sandbox.prepare import task_sandbox_config
from ridgeline.tasks.loader import Task

TESTS_MOUNT = "/tests"


@dataclass
class VerifierResult:
    """What the verifier said: a number (``reward``) or named numbers (``rewards``), plus its output."""

    reward: float | None
    rewards: dict[str, float] = field(default_factory=dict)
    exit_code: int = 0
    timed_out: bool = False
    stdout: str = ""
    stderr: str = ""
    duration_s: float = 0.0


def read_reward(logs_dir: Path) -> tuple[float | None, dict[str, float]]:
    """Read ``reward.txt`` or ``reward.json`` from a verifier logs directory.

    Raises:
        VerifierError: neither file exists, or the content is not what the contract says.
    """
    txt, js = logs_dir / "reward.txt", logs_dir / "reward.json"
    if txt.is_file() and js.is_file():
        # The contract is one file or the other. Code the verifier runs (the agent's) can write to
        # /logs/verifier, so a second reward file is treated as tampering: the attempt scores 0
        # rather than an infrastructure failure, which would drop it from scoring.
        return 0.0, {"ambiguous_reward_files": 1.0}
    if js.is_file():
        try:
            data = json.loads(js.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise VerifierError(
                f"{js}: not valid JSON ({exc}); expected an object of named numbers"
            ) from None
        if isinstance(data, int | float) and not isinstance(data, bool):
            return float(data), {}
        if not isinstance(data, dict) or not data:
            raise VerifierError(
                f"{js}: expected a non-empty object of named numbers, got {type(data).__name__}"
            )
        named: dict[str, float] = {}
        for k, v in data.items():
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v):
                raise VerifierError(f"{js}: {k!r} is {v!r}; expected a finite number")
            named[str(k)] = float(v)
        return None, named
    if txt.is_file():
        text = txt.read_text(encoding="utf-8", errors="replace").strip()
        try:
            value = float(text.split()[0]) if text else math.nan
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise VerifierError(f"{txt}: expected one number, got {text[:60]!r}")
        return value, {}
    raise VerifierError(
        f"{logs_dir}: the verifier wrote no reward (expected /logs/verifier/reward.txt with one number "
        "or /logs/verifier/reward.json with named numbers)"
    )


def run_verifier(task: Task, snapshot: Snapshot, logs_dir: Path, agent_logs: Path) -> VerifierResult:
    """Run ``tests/test.sh`` on ``snapshot`` (the agent's final workspace) and read the reward.

    Args:
        task: the task.
        snapshot: a snapshot of the agent's sandbox, taken after the agent finished.
        logs_dir: a host directory for ``/logs/verifier`` (created; must be empty).
        agent_logs: the host directory that was the agent's ``/logs/agent``.

    Raises:
        VerifierError: no reward could be read (the task's tests are broken).
        SandboxError: the verifier's sandbox failed (infrastructure).
    """
    from ridgeline.sandbox import create

    logs_dir.mkdir(parents=True, exist_ok=True)
    cfg = task_sandbox_config(
        task,
        agent_logs=agent_logs,
        verifier_logs=logs_dir,
        verifier_logs_writable=True,
        binds=(Bind(source=task.tests_dir, target=TESTS_MOUNT),),
    )
    with create(cfg, snapshot=snapshot) as sb:
        r = sb.exec("bash /tests/test.sh", timeout=task.spec.verifier.timeout_sec)
    (logs_dir / "test-stdout.txt").write_text(r.stdout)
    (logs_dir / "test-stderr.txt").write_text(r.stderr)
    result = VerifierResult(
        reward=None,
        exit_code=r.exit_code,
        timed_out=r.timed_out,
        stdout=r.stdout,
        stderr=r.stderr,
        duration_s=r.duration_s,
    )
    try:
        result.reward, result.rewards = read_reward(logs_dir)
    except VerifierError as exc:
        if r.timed_out:
            raise VerifierError(
                f"{task.path}: the verifier timed out after "
                f"{task.spec.verifier.timeout_sec:g} s without writing a reward"
            ) from None
        raise VerifierError(f"{exc} [test.sh exit code {r.exit_code}: {r.stderr.strip()[-300:]}]") from None
    return result
