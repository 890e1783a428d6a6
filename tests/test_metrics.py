"""Evaluation statistics: hand-computed values, determinism, infra-failure exclusion, results.json checks."""

from __future__ import annotations

import json
import math
import random
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest

from ridgeline.errors import UserError
from ridgeline.eval.metrics import (
    bootstrap_mean_ci,
    load_results,
    pass_at_k,
    success_by_required_steps,
    summarize,
    wilson_interval,
)


def trial(task: str, passed: bool | None, **kw: Any) -> dict[str, Any]:
    status = kw.pop("status", "ok" if passed is not None else "infra_fail")
    base: dict[str, Any] = {
        "task": task,
        "task_hash": f"sha256:{task}",
        "domain": "terminal",
        "difficulty": "easy",
        "attempt": 0,
        "status": status,
        "reward": None if passed is None else float(passed),
        "passed": passed,
        "steps": 3,
        "wall_s": 1.0,
        "tokens": {"prompt": 100, "cached": 10, "completion": 20},
        "cost_usd": 0.01,
        "tool_calls": 2,
        "invalid_tool_calls": 0,
        "required_steps": None,
        "trajectory": None,
    }
    base.update(kw)
    return base


# -- Wilson -------------------------------------------------------------------------------------------


def test_wilson_7_of_10_by_hand() -> None:
    # p = 0.7, z^2/n = 0.38416: centre = 0.89208 / 1.38416, half = 1.96 * sqrt(0.021 + 0.009604) / 1.38416
    lo, hi = wilson_interval(7, 10)
    centre = (0.7 + 1.96**2 / 20) / (1 + 1.96**2 / 10)
    half = 1.96 * math.sqrt(0.7 * 0.3 / 10 + 1.96**2 / 400) / (1 + 1.96**2 / 10)
    assert lo == pytest.approx(centre - half, abs=1e-12)
    assert hi == pytest.approx(centre + half, abs=1e-12)
    assert (round(lo, 4), round(hi, 4)) == (0.3968, 0.8922)


def test_wilson_edges_and_symmetry() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo0, hi0 = wilson_interval(0, 10)
    assert lo0 == 0.0 and hi0 == pytest.approx(0.2775, abs=1e-4)
    lo10, hi10 = wilson_interval(10, 10)
    assert hi10 == 1.0 and lo10 == pytest.approx(0.7225, abs=1e-4)
    lo3, hi3 = wilson_interval(3, 10)
    lo7, hi7 = wilson_interval(7, 10)
    assert lo3 == pytest.approx(1 - hi7) and hi3 == pytest.approx(1 - lo7)
    # a wider z gives a wider interval
    assert wilson_interval(7, 10, z=2.576)[0] < lo7


@pytest.mark.parametrize(("s", "n"), [(-1, 5), (6, 5), (0, -1)])
def test_wilson_rejects_impossible_counts(s: int, n: int) -> None:
    with pytest.raises(ValueError):
        wilson_interval(s, n)


# -- pass@k -------------------------------------------------------------------------------------------


def test_pass_at_k_n5_c2_by_hand() -> None:
    # 1 - C(3,k)/C(5,k): k=1: 1-3/5, k=2: 1-3/10, k=3: 1-1/10, k>=4: C(3,k)=0
    assert [pass_at_k(5, 2, k) for k in range(1, 6)] == pytest.approx([0.4, 0.7, 0.9, 1.0, 1.0])


def test_pass_at_k_matches_the_binomial_formula() -> None:
    for n in range(1, 13):
        for c in range(n + 1):
            for k in range(1, n + 1):
                exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
                assert pass_at_k(n, c, k) == pytest.approx(float(exact), abs=1e-12), (n, c, k)


def test_pass_at_k_is_stable_for_large_n() -> None:
    exact = 1 - Fraction(math.comb(997, 100), math.comb(1000, 100))
    assert pass_at_k(1000, 3, 100) == pytest.approx(float(exact), rel=1e-12)
    assert pass_at_k(1000, 0, 500) == 0.0
    assert pass_at_k(1000, 1000, 1) == 1.0


@pytest.mark.parametrize(("n", "c", "k"), [(5, 6, 1), (5, -1, 1), (5, 2, 0), (5, 2, 6)])
def test_pass_at_k_rejects_bad_arguments(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)


# -- clustered bootstrap -------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_with_a_seed() -> None:
    rng = random.Random(1)
    data = {f"t{i}": [rng.random() for _ in range(rng.randint(1, 4))] for i in range(30)}
    first = bootstrap_mean_ci(data, n_boot=500, seed=7)
    assert bootstrap_mean_ci(data, n_boot=500, seed=7) == first
    assert bootstrap_mean_ci(list(data.values()), n_boot=500, seed=7) == first
    assert bootstrap_mean_ci(data, n_boot=500, seed=8) != first
    mean = sum(sum(v) for v in data.values()) / sum(len(v) for v in data.values())
    assert first[0] < mean < first[1]


def test_bootstrap_resamples_tasks_not_trials() -> None:
    # Two tasks, ten trials each, perfectly correlated within a task. Resampling tasks, a replicate is
    # all-pass, all-fail or half: the 95% interval spans [0, 1]. Resampling trials would give ~[0.4, 0.6].
    lo, hi = bootstrap_mean_ci({"a": [1.0] * 10, "b": [0.0] * 10}, n_boot=1000, seed=0)
    assert (lo, hi) == (0.0, 1.0)


def test_bootstrap_degenerate_and_empty() -> None:
    assert bootstrap_mean_ci({"a": [0.5, 0.5], "b": [0.5]}) == (0.5, 0.5)
    assert bootstrap_mean_ci({"a": [2.0], "b": []}) == (2.0, 2.0)
    with pytest.raises(ValueError):
        bootstrap_mean_ci({"a": []})


# -- summarize -----------------------------------------------------------------------------------------


@pytest.fixture
def trials() -> list[dict[str, Any]]:
    return [
        # t1: 2/2 pass, terminal/easy
        trial("t1", True, attempt=0, steps=4, required_steps=1),
        trial("t1", True, attempt=1, steps=6, required_steps=1),
        # t2: 1/2 pass, finance/hard, one invalid tool call
        trial("t2", True, attempt=0, domain="finance", difficulty="hard", steps=10, required_steps=6),
        trial(
            "t2",
            False,
            attempt=1,
            domain="finance",
            difficulty="hard",
            status="step_limit",
            steps=20,
            required_steps=6,
            invalid_tool_calls=1,
        ),
        # t3: 0/2 pass, finance/medium; plus an infra failure that must not count
        trial(
            "t3", False, attempt=0, domain="finance", difficulty="medium", status="timeout", required_steps=3
        ),
        trial("t3", False, attempt=1, domain="finance", difficulty="medium", required_steps=3),
        trial(
            "t3",
            None,
            attempt=2,
            domain="finance",
            difficulty="medium",
            tool_calls=0,
            cost_usd=0.0,
            tokens={"prompt": 5, "cached": 0, "completion": 0},
        ),
    ]


def test_summarize_by_hand(trials: list[dict[str, Any]]) -> None:
    s = summarize(trials, k=2)
    assert set(s) == {
        "n_tasks", "n_trials", "pass_rate", "pass_rate_ci95", "pass_at_k", "mean_reward", "mean_reward_ci95",
        "n_infra_fail", "by_domain", "by_difficulty", "tokens", "cost_usd", "wall_s", "tool_call_accuracy",
        "steps_to_success", "status_counts",
    }  # fmt: skip
    assert s["n_tasks"] == 3
    assert s["n_trials"] == 7
    assert s["n_infra_fail"] == 1
    assert s["pass_rate"] == pytest.approx(3 / 6)
    assert s["pass_rate_ci95"] == pytest.approx(list(wilson_interval(3, 6)))
    # pass@1 per task: 1, 1/2, 0 -> 1/2; pass@2: 1, 1, 0 -> 2/3
    assert s["pass_at_k"] == pytest.approx({"1": 0.5, "2": 2 / 3})
    assert s["mean_reward"] == pytest.approx(0.5)
    lo, hi = s["mean_reward_ci95"]
    assert 0.0 <= lo <= 0.5 <= hi <= 1.0
    assert s["by_domain"]["terminal"] == {
        "pass_rate": 1.0,
        "pass_rate_ci95": list(wilson_interval(2, 2)),
        "n": 2,
    }
    assert s["by_domain"]["finance"]["pass_rate"] == pytest.approx(1 / 4)
    assert s["by_domain"]["finance"]["n"] == 4
    assert list(s["by_difficulty"]) == ["easy", "medium", "hard"]
    assert s["by_difficulty"]["medium"]["pass_rate"] == 0.0
    # tokens and cost add up every trial, infra failures included
    assert s["tokens"] == {"prompt": 605, "cached": 60, "completion": 120}
    assert s["cost_usd"] == pytest.approx(0.06)
    assert s["wall_s"] == pytest.approx(7.0)
    # 12 calls in scored trials, 1 invalid
    assert s["tool_call_accuracy"] == pytest.approx(11 / 12)
    assert s["steps_to_success"] == {"mean": pytest.approx(20 / 3), "median": 6}
    json.dumps(s)  # plain JSON


def test_status_counts_exact(trials: list[dict[str, Any]]) -> None:
    assert summarize(trials, k=2)["status_counts"] == {
        "ok": 4,
        "step_limit": 1,
        "timeout": 1,
        "infra_fail": 1,
    }


def test_infra_failures_never_move_rates(trials: list[dict[str, Any]]) -> None:
    base = summarize(trials, k=2)
    more = trials + [trial("t1", None, attempt=i + 5, status="infra_fail") for i in range(10)]
    s = summarize(more, k=2)
    for key in ("pass_rate", "pass_rate_ci95", "pass_at_k", "mean_reward", "by_domain", "tool_call_accuracy"):
        assert s[key] == base[key], key
    assert s["n_infra_fail"] == 11


def test_pass_at_k_only_where_every_task_has_enough_scored_trials(trials: list[dict[str, Any]]) -> None:
    # t1 loses a trial to the infrastructure: it has one scored trial, so pass@2 is not defined.
    trials[1] = trial("t1", None, attempt=1, status="infra_fail")
    s = summarize(trials, k=2)
    assert list(s["pass_at_k"]) == ["1"]
    # asking for k=5 never invents pass@3..5
    assert list(summarize(trials, k=5)["pass_at_k"]) == ["1"]


def test_summarize_with_nothing_scored() -> None:
    s = summarize([trial("t1", None, status="infra_fail")], k=1)
    assert s["pass_rate"] is None
    assert s["pass_rate_ci95"] == [0.0, 1.0]
    assert s["pass_at_k"] == {}
    assert s["mean_reward"] is None and s["mean_reward_ci95"] is None
    assert s["tool_call_accuracy"] is None
    assert s["steps_to_success"] == {"mean": None, "median": None}
    assert s["by_domain"]["terminal"]["n"] == 0
    assert summarize([], k=1)["n_tasks"] == 0
    with pytest.raises(ValueError):
        summarize([], k=0)


def test_success_by_required_steps(trials: list[dict[str, Any]]) -> None:
    buckets = success_by_required_steps(trials)
    assert [(b["label"], b["n"], b["pass_rate"]) for b in buckets] == [
        ("1", 2, 1.0),
        ("3–4", 2, 0.0),
        ("5–8", 2, 0.5),
    ]
    assert buckets[2]["lo"] == 5 and buckets[2]["hi"] == 8
    assert buckets[2]["pass_rate_ci95"] == list(wilson_interval(1, 2))
    assert success_by_required_steps([trial("x", True)]) == []  # no required_steps recorded


# -- load_results --------------------------------------------------------------------------------------


def _write(run: Path, doc: Any) -> Path:
    run.mkdir(parents=True, exist_ok=True)
    (run / "results.json").write_text(doc if isinstance(doc, str) else json.dumps(doc))
    return run


def test_load_results_fills_defaults(tmp_path: Path) -> None:
    run = _write(
        tmp_path / "run", {"agent": "mock", "k": 1, "trials": [{"task": "a", "status": "ok", "passed": True}]}
    )
    doc = load_results(run)
    assert doc["agent"] == "mock"
    assert doc["trials"][0]["tool_calls"] == 0 and doc["trials"][0]["task_hash"] is None
    assert doc["run_dir"] == str(run)
    assert load_results(run / "results.json")["trials"] == doc["trials"]


@pytest.mark.parametrize(
    ("doc", "expected"),
    [
        (None, "results.json: file is missing"),
        ("{not json", "results.json: is not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ({"summary": {}}, "results.json: trials: missing"),
        ({"trials": [{"task": "a", "status": "ok"}]}, "results.json: trials[0].passed: missing"),
        ({"trials": [{"task": "a", "status": "ok", "passed": "maybe"}]}, "trials[0].passed: Input should be"),
        ({"trials": {"task": "a"}}, "trials: Input should be a valid list"),
    ],
)
def test_load_results_errors_name_file_and_field(tmp_path: Path, doc: Any, expected: str) -> None:
    run = tmp_path / "run"
    if doc is None:
        run.mkdir()
    else:
        _write(run, doc)
    with pytest.raises(UserError) as info:
        load_results(run)
    message = str(info.value)
    assert expected in message
    assert str(run / "results.json") in message
    assert "\n" not in message
