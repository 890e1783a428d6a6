"""Process rewards: credit for the way a trajectory got somewhere, not only where it ended.

Three signals, each a plain function of recorded data (so a stored trajectory can be re-scored):

**Checkpoints.** A task declares subgoals (``[[ridgeline.checkpoints]]`` in ``task.toml``: a name, a
``check`` command, a weight). :func:`evaluate_checkpoints` runs each check in a sandbox holding the
agent's state; exit code 0 means reached. The score is the weighted fraction reached:

.. math:: R_{ckpt} = \\frac{\\sum_k w_k \\,[\\text{reached}_k]}{\\sum_k w_k}

This is the subgoal-level process supervision of Lightman et al. 2023 ("Let's Verify Step by Step")
applied to executable checks instead of human step labels.

**Tool-call validity.** :math:`R_{valid} = n_{valid} / n_{total}` over the trajectory's tool calls
(a call is valid when it named a known tool with arguments that passed schema validation).

**Repetition and no-progress penalties** (each in :math:`[-1, 0]`, so that positive weights subtract).
With actions :math:`a_1..a_n` (tool name + arguments, compared canonically as sorted JSON) and
observations :math:`o_1..o_n`:

.. math::
    P_{rep} = -\\frac{|\\{i \\ge 2 : a_i = a_{i-1}\\}|}{n - 1}
    \\qquad
    P_{stall} = -\\frac{|\\{i \\ge 2 : \\exists j < i,\\ (a_j, o_j) = (a_i, o_i)\\}|}{n - 1}

:math:`P_{rep}` counts immediate repeats of the same call. :math:`P_{stall}` counts steps that redo an
earlier call *and* get the identical observation back — the environment showed nothing new, so the
step made no progress. Identical observations alone are not counted: many legitimate calls return the
same short text (``"ok"`` after a write). Trajectories with fewer than two steps get 0.
"""

from __future__ import annotations

import itertools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

#: One agent action: the tool's name and its arguments.
Action = tuple[str, Mapping[str, Any]]


class _ExecOutcome(Protocol):
    @property
    def exit_code(self) -> int: ...

    @property
    def timed_out(self) -> bool: ...


class CheckSandbox(Protocol):
    """What :func:`evaluate_checkpoints` needs: any :class:`~ridgeline.sandbox.base.Sandbox` fits."""

    def exec(self, command: str, *, timeout: float | None = None) -> _ExecOutcome: ...


class CheckpointLike(Protocol):
    """A declared checkpoint (:class:`ridgeline.tasks.spec.Checkpoint` fits)."""

    @property
    def name(self) -> str: ...

    @property
    def check(self) -> str: ...

    @property
    def weight(self) -> float: ...


@dataclass(frozen=True)
class CheckpointResult:
    """Whether one checkpoint was reached. ``exit_code`` is None when the result was given, not run."""

    name: str
    weight: float
    reached: bool
    exit_code: int | None = None
    timed_out: bool = False


def evaluate_checkpoints(
    sandbox: CheckSandbox, checkpoints: Iterable[CheckpointLike], timeout: float
) -> list[CheckpointResult]:
    """Run each checkpoint's ``check`` command in ``sandbox``; exit code 0 (and no timeout) = reached.

    Args:
        sandbox: A sandbox holding the agent's state (the caller creates and closes it).
        checkpoints: The task's declared checkpoints, in order.
        timeout: Seconds allowed for each check command.

    Returns:
        One result per checkpoint, in the declared order.

    Raises:
        SandboxError: the sandbox itself failed (an infrastructure failure, not a missed checkpoint).
    """
    results = []
    for cp in checkpoints:
        res = sandbox.exec(cp.check, timeout=timeout)
        results.append(
            CheckpointResult(
                name=cp.name,
                weight=float(cp.weight),
                reached=res.exit_code == 0 and not res.timed_out,
                exit_code=res.exit_code,
                timed_out=res.timed_out,
            )
        )
    return results


def checkpoint_score(results: Iterable[CheckpointResult | tuple[str, float, bool]]) -> float | None:
    """Weighted fraction of checkpoints reached, :math:`\\sum_k w_k [reached_k] / \\sum_k w_k`.

    Args:
        results: :class:`CheckpointResult` objects or ``(name, weight, reached)`` tuples.

    Returns:
        The score in [0, 1], or None when there are no checkpoints (the component is then absent).

    Raises:
        ValueError: a negative or non-finite weight, or weights that sum to zero.

    Example:
        >>> checkpoint_score([("build", 1.0, True), ("tests", 3.0, False)])
        0.25
    """
    items = [r if isinstance(r, CheckpointResult) else CheckpointResult(r[0], r[1], r[2]) for r in results]
    if not items:
        return None
    for item in items:
        if not math.isfinite(item.weight) or item.weight < 0:
            raise ValueError(f"checkpoint {item.name!r}: weight must be finite and >= 0, got {item.weight}")
    total = math.fsum(item.weight for item in items)
    if total <= 0:
        raise ValueError("checkpoint weights sum to zero: give at least one checkpoint a positive weight")
    return math.fsum(item.weight for item in items if item.reached) / total


def tool_call_validity(valid: int, total: int) -> float | None:
    """Fraction of tool calls that were valid, ``valid / total``; None when no call was made.

    Raises:
        ValueError: negative counts or ``valid > total``.
    """
    if valid < 0 or total < 0 or valid > total:
        raise ValueError(f"tool-call counts must satisfy 0 <= valid <= total, got {valid}/{total}")
    return None if total == 0 else valid / total


def canonical_args(args: Mapping[str, Any]) -> str:
    """Arguments as sorted, compact JSON (non-JSON values via ``str``)."""
    return json.dumps(dict(args), sort_keys=True, separators=(",", ":"), default=str)


def canonical_action(action: Action) -> str:
    """A stable string for an action: its name, a space, its :func:`canonical_args`."""
    name, args = action
    return f"{name} {canonical_args(args)}"


def repetition_penalty(actions: Sequence[Action]) -> float:
    """:math:`-|\\{i \\ge 2: a_i = a_{i-1}\\}| / (n-1)`: the share of immediately repeated calls, negated.

    Example:
        >>> repetition_penalty([("ls", {}), ("ls", {}), ("cat", {"path": "a"})])
        -0.5
    """
    if len(actions) < 2:
        return 0.0
    keys = [canonical_action(a) for a in actions]
    repeats = sum(1 for prev, cur in itertools.pairwise(keys) if prev == cur)
    return -repeats / (len(keys) - 1)


def no_progress_penalty(actions: Sequence[Action], observations: Sequence[str]) -> float:
    """:math:`-|\\{i \\ge 2: \\exists j<i, (a_j,o_j)=(a_i,o_i)\\}| / (n-1)`: steps that changed nothing.

    Raises:
        ValueError: ``actions`` and ``observations`` differ in length.
    """
    if len(actions) != len(observations):
        raise ValueError(
            f"need one observation per action, got {len(actions)} actions "
            f"and {len(observations)} observations"
        )
    if len(actions) < 2:
        return 0.0
    seen: set[tuple[str, str]] = set()
    stalls = 0
    for action, obs in zip(actions, observations, strict=True):
        step = (canonical_action(action), obs)
        if step in seen:
            stalls += 1
        seen.add(step)
    return -stalls / (len(actions) - 1)
