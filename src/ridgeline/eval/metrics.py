"""Evaluation statistics: confidence intervals, unbiased pass@k and the ``summary`` block of a run.

Everything here is pure Python (``math``, ``random``, ``statistics``) so that the slim core can
score a run without numpy.

A *trial record* is one entry of ``results.json``'s ``trials`` list (see :func:`load_results`). A trial
is *scored* when its status is not ``infra_fail`` and ``passed`` is not null: infrastructure failures
are never counted as wrong answers; they are excluded from every rate and reported apart
(``n_infra_fail``, ``status_counts``).

Trials of one task are correlated (same prompt, same environment), so intervals on means are computed
with a *clustered* bootstrap that resamples tasks, keeping each task's trials together. The pass-rate
interval is a Wilson score interval over scored trials, which treats trials as independent; with
several trials per task it is narrower than the clustered truth, and :func:`bootstrap_mean_ci` over
per-task pass indicators gives the conservative alternative.
"""

from __future__ import annotations

import json
import math
import random
import statistics
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ridgeline.errors import UserError

INFRA_FAIL = "infra_fail"
TOKEN_KINDS = ("prompt", "cached", "completion")

Trial = Mapping[str, Any]
"""One trial record, as read from ``results.json``."""


# -- intervals and estimators -------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score interval for a binomial proportion.

    Unlike the normal ("Wald") interval it stays inside [0, 1] and keeps its coverage near 0 and 1.

    Args:
        successes: number of successes, ``0 <= successes <= n``.
        n: number of trials. With ``n == 0`` nothing is known and the interval is ``(0.0, 1.0)``.
        z: the standard-normal quantile; 1.96 gives a 95% interval.

    Example:
        >>> lo, hi = wilson_interval(7, 10)
        >>> round(lo, 4), round(hi, 4)
        (0.3968, 0.8922)
    """
    if n < 0 or not 0 <= successes <= n:
        raise ValueError(f"need 0 <= successes <= n, got successes={successes}, n={n}")
    if n == 0:
        return (0.0, 1.0)
    p = successes / n
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z / denom * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n))
    return (max(0.0, center - half), min(1.0, center + half))


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from ``n`` samples of which ``c`` passed (Chen et al., 2021).

    pass@k = 1 - C(n-c, k) / C(n, k), the chance that at least one of ``k`` samples drawn without
    replacement from the ``n`` passes. Computed as the product ``prod_{i=n-c+1}^{n} (1 - k/i)``, which
    never forms the (huge) binomial coefficients.

    Example:
        >>> [round(pass_at_k(5, 2, k), 4) for k in range(1, 6)]
        [0.4, 0.7, 0.9, 1.0, 1.0]
    """
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= c <= n and 1 <= k <= n, got n={n}, c={c}, k={k}")
    if n - c < k:
        return 1.0
    prod = 1.0
    for i in range(n - c + 1, n + 1):
        prod *= 1.0 - k / i
    return 1.0 - prod


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolation quantile of an already sorted, non-empty sequence."""
    pos = q * (len(sorted_values) - 1)
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_values) - 1)
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (pos - lo)


def bootstrap_mean_ci(
    values_by_task: Mapping[Any, Sequence[float]] | Iterable[Sequence[float]],
    n_boot: int = 2000,
    seed: int = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """Percentile interval for the mean of all values, resampling *tasks* (a clustered bootstrap).

    Each bootstrap replicate draws as many tasks as there are, with replacement, and keeps every value
    of a drawn task; the statistic is the mean over all values in the replicate (the same estimator as
    the point estimate ``sum(all values) / count``). Tasks with no values are ignored.

    Args:
        values_by_task: per-task values, as a mapping ``task -> values`` or an iterable of sequences.
        n_boot: number of bootstrap replicates.
        seed: seed of the private random generator; the same inputs and seed give the same interval.
        level: coverage of the interval.

    Raises:
        ValueError: there is no value at all.
    """
    groups = values_by_task.values() if isinstance(values_by_task, Mapping) else values_by_task
    sums: list[float] = []
    counts: list[int] = []
    for vals in groups:
        if len(vals):
            sums.append(math.fsum(vals))
            counts.append(len(vals))
    if not sums:
        raise ValueError("bootstrap_mean_ci needs at least one value")
    if n_boot < 1 or not 0 < level < 1:
        raise ValueError(f"need n_boot >= 1 and 0 < level < 1, got n_boot={n_boot}, level={level}")
    rng = random.Random(seed)
    m = len(sums)
    indices = range(m)
    stats: list[float] = []
    for _ in range(n_boot):
        picks = rng.choices(indices, k=m)
        stats.append(math.fsum(sums[i] for i in picks) / sum(counts[i] for i in picks))
    stats.sort()
    tail = (1 - level) / 2
    return (_quantile(stats, tail), _quantile(stats, 1 - tail))


# -- trial records ------------------------------------------------------------------------------------


def is_scored(trial: Trial) -> bool:
    """Whether a trial enters rates: not an infrastructure failure and ``passed`` is known."""
    return trial.get("status") != INFRA_FAIL and trial.get("passed") is not None


def task_key(trial: Trial) -> str:
    """Identity of a trial's task within a run: its content hash, or its name when there is none."""
    return str(trial.get("task_hash") or trial["task"])


def _by_task(trials: Iterable[Trial]) -> dict[str, list[Trial]]:
    groups: dict[str, list[Trial]] = defaultdict(list)
    for t in trials:
        groups[task_key(t)].append(t)
    return dict(groups)


def _num(value: Any) -> float:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else 0.0


def _rate(trials: Sequence[Trial]) -> dict[str, Any]:
    n = len(trials)
    c = sum(1 for t in trials if t["passed"] is True)
    lo, hi = wilson_interval(c, n)
    return {"pass_rate": c / n if n else None, "pass_rate_ci95": [lo, hi], "n": n}


def _difficulty_order(name: str) -> tuple[int, str]:
    known = ["trivial", "easy", "medium", "hard", "expert"]
    return (known.index(name), "") if name in known else (len(known), name)


def _rates_by(trials: Sequence[Trial], field: str, default: str) -> dict[str, dict[str, Any]]:
    """Pass rate (Wilson CI) per value of ``field``; groups whose trials all failed on infra have n=0."""
    groups: dict[str, list[Trial]] = {}
    for t in trials:
        group = groups.setdefault(str(t.get(field) or default), [])
        if is_scored(t):
            group.append(t)
    order = sorted(groups, key=_difficulty_order) if field == "difficulty" else sorted(groups)
    return {name: _rate(groups[name]) for name in order}


def summarize(trials: Sequence[Trial], k: int) -> dict[str, Any]:
    """The ``summary`` block of ``results.json``, computed from trial records.

    Definitions:
        - ``n_tasks`` counts distinct tasks, ``n_trials`` every trial (infra failures included).
        - ``pass_rate``: passed / scored trials, with a Wilson 95% interval.
        - ``pass_at_k[k']``: the unbiased estimator per task over its scored trials, averaged over the
          tasks that have any; present for every ``k'`` in ``1..k`` that every such task has at least
          ``k'`` scored trials for.
        - ``mean_reward``: mean reward of scored trials, with a task-clustered bootstrap interval.
        - ``by_domain`` / ``by_difficulty``: pass rate, Wilson interval and scored-trial count ``n``.
        - ``tokens``, ``cost_usd`` and ``wall_s`` add up every trial (infra failures cost too);
          ``wall_s`` is therefore total trial time, not elapsed time.
        - ``tool_call_accuracy``: valid / all tool calls of scored trials (``tool_calls`` counts all
          calls, ``invalid_tool_calls`` the rejected ones).
        - ``steps_to_success``: mean and median ``steps`` of passed trials.

    Quantities that are undefined for lack of data (no scored trial, no tool call, no success) are
    ``None``, never a made-up zero.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    scored = [t for t in trials if is_scored(t)]
    n = len(scored)
    passes = sum(1 for t in scored if t["passed"] is True)
    lo, hi = wilson_interval(passes, n)

    per_task = {key: ts for key, ts in _by_task(scored).items() if ts}
    pass_at: dict[str, float] = {}
    for kk in range(1, k + 1):
        if not per_task or any(len(ts) < kk for ts in per_task.values()):
            break
        est = [pass_at_k(len(ts), sum(1 for t in ts if t["passed"] is True), kk) for ts in per_task.values()]
        pass_at[str(kk)] = statistics.fmean(est)

    rewards = {
        key: [_num(t.get("reward")) for t in ts if t.get("reward") is not None]
        for key, ts in per_task.items()
    }
    has_reward = any(rewards.values())
    all_rewards = [r for rs in rewards.values() for r in rs]

    calls = sum(int(_num(t.get("tool_calls"))) for t in scored)
    invalid = sum(int(_num(t.get("invalid_tool_calls"))) for t in scored)
    success_steps = [
        _num(t.get("steps")) for t in scored if t["passed"] is True and t.get("steps") is not None
    ]

    tokens = dict.fromkeys(TOKEN_KINDS, 0)
    for t in trials:
        tok = t.get("tokens") or {}
        for kind in TOKEN_KINDS:
            tokens[kind] += int(_num(tok.get(kind)))

    return {
        "n_tasks": len(_by_task(trials)),
        "n_trials": len(trials),
        "pass_rate": passes / n if n else None,
        "pass_rate_ci95": [lo, hi],
        "pass_at_k": pass_at,
        "mean_reward": statistics.fmean(all_rewards) if has_reward else None,
        "mean_reward_ci95": list(bootstrap_mean_ci(rewards)) if has_reward else None,
        "n_infra_fail": sum(1 for t in trials if t.get("status") == INFRA_FAIL),
        "by_domain": _rates_by(trials, "domain", "general"),
        "by_difficulty": _rates_by(trials, "difficulty", "unknown"),
        "tokens": tokens,
        "cost_usd": math.fsum(_num(t.get("cost_usd")) for t in trials),
        "wall_s": math.fsum(_num(t.get("wall_s")) for t in trials),
        "tool_call_accuracy": (calls - invalid) / calls if calls else None,
        "steps_to_success": {
            "mean": statistics.fmean(success_steps) if success_steps else None,
            "median": statistics.median(success_steps) if success_steps else None,
        },
        "status_counts": dict(Counter(str(t.get("status")) for t in trials).most_common()),
    }


def success_by_required_steps(trials: Sequence[Trial]) -> list[dict[str, Any]]:
    """Pass rate of scored trials bucketed by the task's ``required_steps`` (1, 2, 3-4, 5-8, ...).

    Buckets double in width so that long-horizon tasks are not spread thin. Trials without
    ``required_steps`` are left out; empty buckets are omitted. Each bucket is
    ``{"lo", "hi", "label", "n", "pass_rate", "pass_rate_ci95"}``.
    """
    buckets: dict[tuple[int, int], list[Trial]] = defaultdict(list)
    for t in trials:
        req = t.get("required_steps")
        if not is_scored(t) or not isinstance(req, int) or isinstance(req, bool) or req < 1:
            continue
        lo = 1 if req == 1 else 2 ** (math.ceil(math.log2(req)) - 1) + 1
        hi = 1 if req == 1 else 2 ** math.ceil(math.log2(req))
        buckets[(lo, hi)].append(t)
    out = []
    for lo, hi in sorted(buckets):
        label = str(lo) if lo == hi else f"{lo}–{hi}"
        out.append({"lo": lo, "hi": hi, "label": label, **_rate(buckets[(lo, hi)])})
    return out


# -- reading results.json -----------------------------------------------------------------------------


class TrialRecord(BaseModel):
    """The fields of a trial record that statistics and reports read; other keys are kept."""

    model_config = ConfigDict(extra="allow")

    task: str
    task_hash: str | None = None
    domain: str | None = None
    difficulty: str | None = None
    attempt: int = 0
    status: str
    reward: float | None = None
    passed: bool | None
    steps: int | None = None
    wall_s: float | None = None
    tokens: dict[str, int | None] = Field(default_factory=dict)
    cost_usd: float | None = None
    tool_calls: int = 0
    invalid_tool_calls: int = 0
    required_steps: int | None = None
    trajectory: str | None = None


class _ResultsFile(BaseModel):
    model_config = ConfigDict(extra="allow")

    agent: str | None = None
    policy_digest: str | None = None
    k: int | None = Field(default=None, ge=1)
    summary: dict[str, Any] | None = None
    trials: list[TrialRecord]


def _loc(loc: Sequence[int | str]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def load_results(path: str | Path) -> dict[str, Any]:
    """Read and check a run's ``results.json`` (``path`` is the run directory or the file itself).

    Returns the parsed document with every trial record checked and its optional fields filled in
    with their defaults; a ``"run_dir"`` key holds the directory that relative paths start from.

    Raises:
        UserError: the file is missing, is not JSON, or a field is missing or has the wrong type. The
            message names the file and the field (``trials[3].passed``).
    """
    p = Path(path)
    file = p / "results.json" if p.is_dir() or p.suffix != ".json" else p
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{file}: file is missing (expected the results.json of an eval run)") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UserError(f"{file}: cannot be read ({exc.__class__.__name__}: {exc})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise UserError(
            f"{file}: is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    if not isinstance(data, dict):
        raise UserError(
            f"{file}: expected a JSON object with 'summary' and 'trials', got {type(data).__name__}"
        )
    try:
        doc = _ResultsFile.model_validate(data)
    except ValidationError as exc:
        errs = exc.errors()
        first = errs[0]
        where = _loc(first["loc"]) or "(top level)"
        msg = "missing" if first["type"] == "missing" else f"{first['msg']} (got {first.get('input')!r:.60})"
        more = f" (and {len(errs) - 1} more problems)" if len(errs) > 1 else ""
        raise UserError(f"{file}: {where}: {msg}{more}") from None
    out = dict(data)
    out["trials"] = [t.model_dump() for t in doc.trials]
    out["run_dir"] = str(file.parent)
    return out


__all__ = [
    "INFRA_FAIL",
    "TrialRecord",
    "bootstrap_mean_ci",
    "is_scored",
    "load_results",
    "pass_at_k",
    "success_by_required_steps",
    "summarize",
    "task_key",
    "wilson_interval",
]
