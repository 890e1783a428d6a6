"""Paired comparison of two evaluation runs (A = baseline, B = candidate).

Two runs of different agents on the same tasks are *paired* data: a task that is hard for A tends to
be hard for B. Comparing their pass rates as if they were independent samples throws that away and
needs many more tasks to see the same difference. So:

- Trials are paired by task content hash (``task_hash``); when either run lacks hashes, by task name,
  and the comparison says so in its notes. A task whose hash differs between the runs is not the same
  task: it is listed in both ``only_in_a`` and ``only_in_b``, and named in the notes.
- Each task gets a pass rate per run (its scored trials; infra failures excluded). A task whose trials
  in either run are all infra failures cannot be paired and is listed in ``unscored``.
- The difference B - A is the mean over paired tasks of ``rate_B - rate_A``, with a 95% paired
  bootstrap interval that resamples tasks.
- **Verdict**: an exact McNemar test on tasks. A task *passes* in a run when its mean pass over that
  run's scored trials is >= 0.5 (with one trial per task this is simply "passed"; with several, a
  majority with ties counted as a pass). The discordant tasks (passed in exactly one run) are a
  Binomial(n, 1/2) sample under "no difference"; the two-sided exact p-value decides, at ``alpha``
  (0.05): ``better`` when p < alpha and more tasks flipped fail -> pass than pass -> fail, ``worse`` in
  the opposite case, otherwise ``indistinguishable``. The verdict uses the exact test rather than the
  bootstrap interval because the percentile bootstrap undercovers on the few tasks typical of agent
  benchmarks; when the two disagree, a note says so.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

from ridgeline.eval.metrics import bootstrap_mean_ci, is_scored

Verdict = Literal["better", "worse", "indistinguishable"]

ALPHA = 0.05


def mcnemar_exact_p(fail_to_pass: int, pass_to_fail: int) -> float:
    """Two-sided exact McNemar p-value from the two discordant counts.

    Under the null hypothesis each discordant pair is equally likely to go either way, so the smaller
    count is Binomial(n, 1/2); the p-value doubles its lower tail (capped at 1). With no discordant
    pairs the p-value is 1.

    Example:
        >>> round(mcnemar_exact_p(8, 1), 6)
        0.039062
    """
    if fail_to_pass < 0 or pass_to_fail < 0:
        raise ValueError("discordant counts must be >= 0")
    n = fail_to_pass + pass_to_fail
    if n == 0:
        return 1.0
    low = min(fail_to_pass, pass_to_fail)
    tail = math.fsum(math.comb(n, i) for i in range(low + 1)) / 2.0**n
    return min(1.0, 2.0 * tail)


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class TaskPair(_Frozen):
    """One task seen in both runs."""

    task: str
    key: str
    domain: str
    a_n: int
    a_pass_rate: float
    b_n: int
    b_pass_rate: float

    @property
    def a_passed(self) -> bool:
        return self.a_pass_rate >= 0.5

    @property
    def b_passed(self) -> bool:
        return self.b_pass_rate >= 0.5


class PairedStats(_Frozen):
    """The comparison over a set of paired tasks (all of them, or one domain)."""

    n_tasks: int
    a_pass_rate: float | None
    b_pass_rate: float | None
    diff: float | None
    """Mean over tasks of ``rate_B - rate_A``."""
    diff_ci95: tuple[float, float] | None
    fail_to_pass: int
    """Tasks that fail in A and pass in B."""
    pass_to_fail: int
    """Tasks that pass in A and fail in B."""
    mcnemar_p: float
    verdict: Verdict


class Comparison(_Frozen):
    """The result of :func:`compare_runs`. ``model_dump_json()`` gives its JSON form."""

    agent_a: str | None
    agent_b: str | None
    paired_by: Literal["task_hash", "task"]
    alpha: float
    overall: PairedStats
    by_domain: dict[str, PairedStats]
    tasks: list[TaskPair]
    improved: list[str]
    """Tasks that flipped fail -> pass."""
    regressed: list[str]
    """Tasks that flipped pass -> fail."""
    only_in_a: list[str]
    only_in_b: list[str]
    unscored: list[str]
    """Tasks in both runs whose trials in at least one run were all infrastructure failures."""
    notes: list[str]

    @property
    def verdict(self) -> Verdict:
        return self.overall.verdict


def _paired_stats(pairs: Sequence[TaskPair], alpha: float, seed: int) -> PairedStats:
    f2p = sum(1 for p in pairs if not p.a_passed and p.b_passed)
    p2f = sum(1 for p in pairs if p.a_passed and not p.b_passed)
    pval = mcnemar_exact_p(f2p, p2f)
    verdict: Verdict = "indistinguishable"
    if pval < alpha:
        verdict = "better" if f2p > p2f else "worse"
    if not pairs:
        return PairedStats(
            n_tasks=0,
            a_pass_rate=None,
            b_pass_rate=None,
            diff=None,
            diff_ci95=None,
            fail_to_pass=0,
            pass_to_fail=0,
            mcnemar_p=1.0,
            verdict=verdict,
        )
    diffs = [[p.b_pass_rate - p.a_pass_rate] for p in pairs]
    return PairedStats(
        n_tasks=len(pairs),
        a_pass_rate=statistics.fmean(p.a_pass_rate for p in pairs),
        b_pass_rate=statistics.fmean(p.b_pass_rate for p in pairs),
        diff=statistics.fmean(d[0] for d in diffs),
        diff_ci95=bootstrap_mean_ci(diffs, seed=seed),
        fail_to_pass=f2p,
        pass_to_fail=p2f,
        mcnemar_p=pval,
        verdict=verdict,
    )


def _group(trials: Sequence[Mapping[str, Any]], by_hash: bool) -> dict[str, list[Mapping[str, Any]]]:
    groups: dict[str, list[Mapping[str, Any]]] = {}
    for t in trials:
        key = str(t["task_hash"]) if by_hash else str(t["task"])
        groups.setdefault(key, []).append(t)
    return groups


def _rate(trials: Sequence[Mapping[str, Any]]) -> tuple[int, float | None]:
    scored = [t for t in trials if is_scored(t)]
    if not scored:
        return 0, None
    return len(scored), sum(1 for t in scored if t["passed"] is True) / len(scored)


def compare_runs(
    a: Mapping[str, Any], b: Mapping[str, Any], alpha: float = ALPHA, seed: int = 0
) -> Comparison:
    """Compare run ``b`` (candidate) against run ``a`` (baseline), pairing tasks.

    Args:
        a: the baseline run, as returned by :func:`ridgeline.eval.metrics.load_results`.
        b: the candidate run, same shape.
        alpha: significance level of the verdict.
        seed: seed of the bootstrap, so that the same runs always give the same interval.

    Returns:
        A :class:`Comparison`; see the module docstring for every definition.
    """
    trials_a: list[Mapping[str, Any]] = list(a["trials"])
    trials_b: list[Mapping[str, Any]] = list(b["trials"])
    notes: list[str] = []
    by_hash = all(t.get("task_hash") for t in trials_a + trials_b)
    if not by_hash:
        notes.append(
            "some trials have no task_hash: tasks were paired by name, so a task edited between the "
            "runs cannot be told apart"
        )
    ga, gb = _group(trials_a, by_hash), _group(trials_b, by_hash)

    def name(groups: dict[str, list[Mapping[str, Any]]], key: str) -> str:
        return str(groups[key][0]["task"])

    pairs: list[TaskPair] = []
    unscored: list[str] = []
    for key in sorted(ga.keys() & gb.keys(), key=lambda k: (name(ga, k), k)):
        (na, ra), (nb, rb) = _rate(ga[key]), _rate(gb[key])
        if ra is None or rb is None:
            unscored.append(name(ga, key))
            continue
        first = ga[key][0]
        pairs.append(
            TaskPair(
                task=name(ga, key),
                key=key,
                domain=str(first.get("domain") or "general"),
                a_n=na,
                a_pass_rate=ra,
                b_n=nb,
                b_pass_rate=rb,
            )
        )
    only_a = sorted(name(ga, k) for k in ga.keys() - gb.keys())
    only_b = sorted(name(gb, k) for k in gb.keys() - ga.keys())
    if by_hash:
        changed = sorted(set(only_a) & set(only_b))
        if changed:
            notes.append(
                f"{len(changed)} task(s) changed content between the runs (same name, different hash) and "
                f"were not paired: {', '.join(changed)}"
            )
    if only_a or only_b:
        notes.append(
            f"{len(only_a)} task(s) only in A and {len(only_b)} only in B were left out of the comparison"
        )
    if unscored:
        notes.append(f"{len(unscored)} task(s) had only infrastructure failures in a run and were left out")

    overall = _paired_stats(pairs, alpha, seed)
    ci = overall.diff_ci95
    if ci is not None and overall.verdict == "indistinguishable" and (ci[0] > 0 or ci[1] < 0):
        notes.append(
            "the paired bootstrap interval of the difference excludes 0 but the exact test on tasks does "
            "not reject: the difference is within tasks (partial pass rates); more tasks would settle it"
        )
    domains = sorted({p.domain for p in pairs})
    by_domain = {d: _paired_stats([p for p in pairs if p.domain == d], alpha, seed) for d in domains}
    return Comparison(
        agent_a=a.get("agent"),
        agent_b=b.get("agent"),
        paired_by="task_hash" if by_hash else "task",
        alpha=alpha,
        overall=overall,
        by_domain=by_domain,
        tasks=pairs,
        improved=[p.task for p in pairs if not p.a_passed and p.b_passed],
        regressed=[p.task for p in pairs if p.a_passed and not p.b_passed],
        only_in_a=only_a,
        only_in_b=only_b,
        unscored=unscored,
        notes=notes,
    )


__all__ = ["Comparison", "PairedStats", "TaskPair", "Verdict", "compare_runs", "mcnemar_exact_p"]
