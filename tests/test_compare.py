"""Paired comparison of runs: exact McNemar values, verdicts, flips, unpaired tasks."""

from __future__ import annotations

import json
from typing import Any

import pytest

from ridgeline.eval.compare import Comparison, compare_runs, mcnemar_exact_p


def run(
    outcomes: dict[str, list[bool | None]], agent: str = "a", hashes: bool = True, **domains: str
) -> dict[str, Any]:
    """A results document: ``outcomes[task]`` lists each attempt's ``passed`` (None = infra failure)."""
    trials = []
    for task, results in outcomes.items():
        for attempt, passed in enumerate(results):
            trials.append(
                {
                    "task": task,
                    "task_hash": f"sha256:{task}" if hashes else None,
                    "domain": domains.get(task, "terminal"),
                    "attempt": attempt,
                    "status": "infra_fail" if passed is None else "ok",
                    "passed": passed,
                    "reward": None if passed is None else float(passed),
                }
            )
    return {"agent": agent, "k": max(map(len, outcomes.values()), default=1), "trials": trials}


# -- the exact test ------------------------------------------------------------------------------------


def test_mcnemar_exact_known_values() -> None:
    # 8 vs 1 discordant: 2 * (C(9,0) + C(9,1)) / 2^9 = 20 / 512
    assert mcnemar_exact_p(8, 1) == pytest.approx(20 / 512)
    assert mcnemar_exact_p(1, 8) == mcnemar_exact_p(8, 1)
    # 5 vs 0 cannot reach 5% two-sided; 6 vs 0 can
    assert mcnemar_exact_p(5, 0) == pytest.approx(2 / 32)
    assert mcnemar_exact_p(6, 0) == pytest.approx(2 / 64)
    # 10 vs 2: 2 * (1 + 12 + 66) / 4096
    assert mcnemar_exact_p(10, 2) == pytest.approx(158 / 4096)
    assert mcnemar_exact_p(3, 3) == 1.0
    assert mcnemar_exact_p(0, 0) == 1.0
    with pytest.raises(ValueError):
        mcnemar_exact_p(-1, 2)


# -- verdicts ------------------------------------------------------------------------------------------


def _tasks(n: int) -> list[str]:
    return [f"task-{i:02d}" for i in range(n)]


def test_clearly_better() -> None:
    names = _tasks(20)
    a = run({t: [i < 5] for i, t in enumerate(names)}, agent="base")
    b = run({t: [True] for t in names}, agent="cand")
    c = compare_runs(a, b)
    assert c.verdict == "better"
    assert c.agent_a == "base" and c.agent_b == "cand"
    assert c.paired_by == "task_hash"
    o = c.overall
    assert o.n_tasks == 20
    assert o.a_pass_rate == pytest.approx(0.25) and o.b_pass_rate == 1.0
    assert o.diff == pytest.approx(0.75)
    assert o.diff_ci95 is not None and 0 < o.diff_ci95[0] <= 0.75 <= o.diff_ci95[1]
    assert (o.fail_to_pass, o.pass_to_fail) == (15, 0)
    assert o.mcnemar_p == pytest.approx(2 * 0.5**15)
    assert c.improved == names[5:]
    assert c.regressed == []
    assert c.only_in_a == c.only_in_b == c.unscored == []


def test_clearly_worse_is_the_mirror() -> None:
    names = _tasks(20)
    a = run({t: [True] for t in names})
    b = run({t: [i < 5] for i, t in enumerate(names)})
    c = compare_runs(a, b)
    assert c.verdict == "worse"
    assert c.regressed == names[5:]
    assert c.overall.diff == pytest.approx(-0.75)


def test_identical_runs_are_indistinguishable() -> None:
    outcomes: dict[str, list[bool | None]] = {t: [i % 3 == 0, i % 2 == 0] for i, t in enumerate(_tasks(12))}
    c = compare_runs(run(outcomes), run(outcomes))
    assert c.verdict == "indistinguishable"
    assert c.overall.diff == 0.0
    assert c.overall.diff_ci95 == (0.0, 0.0)
    assert c.overall.mcnemar_p == 1.0
    assert c.improved == c.regressed == []


def test_small_gain_is_not_called_better() -> None:
    names = _tasks(10)
    a = run({t: [i < 4] for i, t in enumerate(names)})
    b = run({t: [i < 8] for i, t in enumerate(names)})  # 4 flips, all one way: p = 0.125
    c = compare_runs(a, b)
    assert c.overall.fail_to_pass == 4
    assert c.overall.mcnemar_p == pytest.approx(0.125)
    assert c.verdict == "indistinguishable"


def test_majority_rule_for_several_trials() -> None:
    # Per-task pass = mean pass >= 0.5: 1/2 counts as a pass, 1/3 does not.
    a = run({"x": [True, False], "y": [True, False, False]})
    b = run({"x": [False, False], "y": [True, True, False]})
    c = compare_runs(a, b)
    pairs = {p.task: p for p in c.tasks}
    assert pairs["x"].a_passed and not pairs["x"].b_passed
    assert not pairs["y"].a_passed and pairs["y"].b_passed
    assert c.regressed == ["x"] and c.improved == ["y"]
    assert pairs["y"].a_pass_rate == pytest.approx(1 / 3)


def test_within_task_gains_get_a_note() -> None:
    # Every task goes from 0/4 to 1/4: the majority never flips, the rate does.
    names = _tasks(30)
    a = run({t: [False] * 4 for t in names})
    b = run({t: [True, False, False, False] for t in names})
    c = compare_runs(a, b)
    assert c.verdict == "indistinguishable"
    assert c.overall.diff == pytest.approx(0.25)
    assert any("bootstrap interval" in n for n in c.notes)


def test_infra_failures_are_excluded_from_rates() -> None:
    a = run({"x": [True, None], "y": [False]})
    b = run({"x": [None, True], "y": [False, None]})
    c = compare_runs(a, b)
    pairs = {p.task: p for p in c.tasks}
    assert pairs["x"].a_n == 1 and pairs["x"].a_pass_rate == 1.0
    assert pairs["x"].b_n == 1 and pairs["x"].b_pass_rate == 1.0
    assert c.verdict == "indistinguishable"


# -- tasks that cannot be paired -------------------------------------------------------------------------


def test_tasks_in_one_run_only_are_listed() -> None:
    a = run({"shared": [True], "old": [True], "flaky-infra": [True]})
    b = run({"shared": [True], "new": [False], "flaky-infra": [None, None]})
    c = compare_runs(a, b)
    assert c.only_in_a == ["old"]
    assert c.only_in_b == ["new"]
    assert c.unscored == ["flaky-infra"]
    assert [p.task for p in c.tasks] == ["shared"]
    assert c.overall.n_tasks == 1
    assert any("only in A" in n for n in c.notes)
    assert any("infrastructure" in n for n in c.notes)


def test_changed_task_content_is_not_paired() -> None:
    a = run({"t": [True], "u": [True]})
    b = run({"t": [False], "u": [True]})
    for tr in b["trials"]:
        if tr["task"] == "t":
            tr["task_hash"] = "sha256:edited"
    c = compare_runs(a, b)
    assert c.only_in_a == c.only_in_b == ["t"]
    assert c.regressed == []
    assert any("changed content" in n and "t" in n for n in c.notes)


def test_falls_back_to_names_and_says_so() -> None:
    a = run({"t": [True], "u": [False]}, hashes=False)
    b = run({"t": [True], "u": [True]})
    c = compare_runs(a, b)
    assert c.paired_by == "task"
    assert c.improved == ["u"]
    assert any("paired by name" in n for n in c.notes)


def test_no_shared_tasks() -> None:
    c = compare_runs(run({"a": [True]}), run({"b": [True]}))
    assert c.overall.n_tasks == 0
    assert c.overall.diff is None and c.overall.diff_ci95 is None
    assert c.verdict == "indistinguishable"


# -- domains and serialisation -------------------------------------------------------------------------------


def test_per_domain_verdicts() -> None:
    names = _tasks(24)
    dom = {t: ("finance" if i < 12 else "terminal") for i, t in enumerate(names)}
    a = run({t: [False] if dom[t] == "finance" else [True] for t in names}, **dom)
    b = run({t: [True] for t in names}, **dom)
    c = compare_runs(a, b)
    assert set(c.by_domain) == {"finance", "terminal"}
    assert c.by_domain["finance"].verdict == "better"
    assert c.by_domain["finance"].n_tasks == 12
    assert c.by_domain["terminal"].verdict == "indistinguishable"
    assert c.by_domain["terminal"].diff == 0.0


def test_comparison_is_deterministic_and_round_trips_json() -> None:
    names = _tasks(15)
    a = run({t: [i % 2 == 0, i % 3 == 0] for i, t in enumerate(names)})
    b = run({t: [i % 2 == 1, True] for i, t in enumerate(names)})
    c1, c2 = compare_runs(a, b), compare_runs(a, b)
    assert c1 == c2
    data = json.loads(c1.model_dump_json())
    assert data["overall"]["verdict"] == c1.verdict
    assert Comparison.model_validate(data) == c1
