"""Curriculum: stage gates, the learnable band, domain mix from curves, determinism and resume."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
from pydantic import ValidationError

from ridgeline.train import Curriculum, CurriculumConfig, StageConfig, TaskInfo

TWO_STAGES = CurriculumConfig(
    stages=(
        StageConfig(name="short", max_horizon=5, gate=0.5, window=4),
        StageConfig(name="long", max_horizon=20, gate=0.9, window=8),
    ),
    seed=1,
)
TASKS = [TaskInfo("short-1", "code", 3), TaskInfo("short-2", "finance", 5), TaskInfo("long-1", "code", 12)]


def test_first_stage_only_samples_short_tasks() -> None:
    cur = Curriculum(TASKS, TWO_STAGES)
    assert [t.id for t in cur.pool()] == ["short-1", "short-2"]
    assert set(cur.sample(50)) == {"short-1", "short-2"}


def test_gate_unlocks_next_stage_when_window_pass_rate_meets_gate() -> None:
    cur = Curriculum(TASKS, TWO_STAGES)
    for passed in (True, False, True):
        cur.record("short-1", passed)
    cur.end_step(1)
    assert cur.stage == 0  # window of 4 not yet full
    cur.record("short-2", False)  # window [T, F, T, F]: 0.5 >= 0.5
    cur.end_step(2)
    assert cur.stage == 1
    assert "long-1" in {t.id for t in cur.pool()}
    unlock = [e for e in cur.log if e["event"] == "stage_unlock"]
    assert len(unlock) == 1
    assert unlock[0]["from"] == "short" and unlock[0]["to"] == "long" and unlock[0]["step"] == 2
    assert unlock[0]["pass_rate"] == 0.5
    assert "gate 0.5" in unlock[0]["reason"]


def test_gate_not_met_keeps_stage() -> None:
    cur = Curriculum(TASKS, TWO_STAGES)
    for passed in (True, False, False, False, True, False):
        cur.record("short-1", passed)
    cur.end_step(1)  # last 4: [F, F, T, F] = 0.25 < 0.5
    assert cur.stage == 0
    assert not [e for e in cur.log if e["event"] == "stage_unlock"]


def test_band_status_and_sampling_weights() -> None:
    tasks = [
        TaskInfo("easy", "code"),
        TaskInfo("learnable", "code"),
        TaskInfo("hard", "code"),
        TaskInfo("new", "code"),
    ]
    cur = Curriculum(
        tasks, CurriculumConfig(seed=0, band=(0.2, 0.8), out_of_band_weight=0.1, domain_mix=False)
    )
    for _ in range(4):
        cur.record("easy", True)
        cur.record("hard", False)
    for passed in (True, False, True, False):
        cur.record("learnable", passed)
    cur.record("new", True)  # one result < min_observations (2)
    assert [cur.task_status(t.id) for t in tasks] == ["too_easy", "in_band", "too_hard", "unexplored"]
    counts = Counter(cur.sample(4000))
    # weights 0.1, 1, 0.1, 1 -> probabilities 0.1/2.2, 1/2.2, 0.1/2.2, 1/2.2
    assert counts["learnable"] / 4000 == pytest.approx(1 / 2.2, abs=0.03)
    assert counts["new"] / 4000 == pytest.approx(1 / 2.2, abs=0.03)
    assert counts["easy"] / 4000 == pytest.approx(0.1 / 2.2, abs=0.015)
    assert counts["hard"] > 0  # out-of-band tasks are rare, not starved
    last = cur.log[-1]
    assert last["event"] == "sample" and "band" in last["reason"]


def test_same_seed_same_decisions() -> None:
    def run() -> list[str]:
        cur = Curriculum(TASKS, TWO_STAGES)
        drawn = cur.sample(10)
        for task_id in drawn:
            cur.record(task_id, task_id.endswith("1"))
        cur.end_step(1)
        return drawn + cur.sample(10)

    assert run() == run()


def _feed(cur: Curriculum, domain_task: dict[str, str], results: dict[str, list[bool]], step: int) -> None:
    for domain, outcomes in results.items():
        for passed in outcomes:
            cur.record(domain_task[domain], passed)
    cur.end_step(step)


def test_domain_mix_favours_slower_improving_domain() -> None:
    config = CurriculumConfig(
        domain_window=4, mix_points=3, mix_temperature=5.0, min_domain_weight=0.5, max_domain_weight=2.0
    )
    cur = Curriculum([TaskInfo("f", "fast"), TaskInfo("s", "slow")], config)
    tasks = {"fast": "f", "slow": "s"}
    F, T = False, True
    _feed(cur, tasks, {"fast": [F, F, F, F], "slow": [T, F, F, F]}, 1)
    assert cur.domain_weights == {"fast": 1.0, "slow": 1.0}  # one point per curve: no slope yet
    _feed(cur, tasks, {"fast": [T, T, F, F], "slow": [T, F, F, F]}, 2)
    _feed(cur, tasks, {"fast": [T, T, T, F], "slow": [T, F, F, F]}, 3)
    # curves: fast 0, .5, .75 (slope .375); slow .25, .25, .25 (slope 0); mean slope .1875
    raw_fast, raw_slow = math.exp(-5 * 0.1875), math.exp(5 * 0.1875)
    mean = (raw_fast + raw_slow) / 2
    assert cur.domain_weights["slow"] == pytest.approx(raw_slow / mean)  # ~1.73, inside the bounds
    assert cur.domain_weights["fast"] == 0.5  # raw_fast / mean ~0.27, raised to the lower bound
    mix = [e for e in cur.log if e["event"] == "domain_mix"][-1]
    assert mix["step"] == 3
    assert mix["slopes"] == pytest.approx({"fast": 0.375, "slow": 0.0})
    assert "improving slower" in mix["reason"]
    counts = Counter(cur.sample(2000))
    assert counts["s"] / 2000 == pytest.approx(1.7341 / 2.2341, abs=0.03)


def test_saturated_domain_gets_no_boost() -> None:
    config = CurriculumConfig(domain_window=4, mix_points=3, band=(0.2, 0.8))
    cur = Curriculum([TaskInfo("d", "done"), TaskInfo("g", "growing")], config)
    tasks = {"done": "d", "growing": "g"}
    T, F = True, False
    _feed(cur, tasks, {"done": [T] * 4, "growing": [F, F, F, F]}, 1)
    _feed(cur, tasks, {"done": [T] * 4, "growing": [T, F, F, F]}, 2)
    _feed(cur, tasks, {"done": [T] * 4, "growing": [T, T, F, F]}, 3)
    # "done" improves slower but is above the band: neutral, not boosted over "growing"
    assert cur.domain_weights == {"done": 1.0, "growing": 1.0}
    mix = [e for e in cur.log if e["event"] == "domain_mix"][-1]
    assert mix["saturated"] == ["done"]


def test_state_round_trip_resumes_identically() -> None:
    cur = Curriculum(TASKS, TWO_STAGES)
    for step in range(3):
        for task_id in cur.sample(6, step=step):
            cur.record(task_id, task_id == "short-1")
        cur.end_step(step)
    state = json.loads(json.dumps(cur.to_dict()))
    restored = Curriculum.from_dict(state, TASKS)
    assert restored.to_dict() == cur.to_dict()
    assert restored.sample(20) == cur.sample(20)
    drained = cur.drain_log()
    assert drained and cur.log == []
    assert all("reason" in entry for entry in drained)


def test_config_errors() -> None:
    with pytest.raises(ValidationError, match="strictly increase"):
        CurriculumConfig(stages=(StageConfig(name="a", max_horizon=5), StageConfig(name="b", max_horizon=5)))
    with pytest.raises(ValidationError, match="band"):
        CurriculumConfig(band=(0.8, 0.2))
    with pytest.raises(ValidationError, match="Extra inputs"):
        CurriculumConfig.model_validate({"stages": [{"name": "a", "max_horizon": 3, "gates": 0.5}]})
    short_only = CurriculumConfig(stages=(StageConfig(name="short", max_horizon=5),))
    with pytest.raises(ValueError, match="never be sampled"):
        Curriculum(TASKS, short_only)
    with pytest.raises(ValueError, match="admits no task"):
        Curriculum(
            [TaskInfo("x", "code", 9)], CurriculumConfig(stages=(StageConfig(name="s", max_horizon=2),))
        )
    with pytest.raises(KeyError):
        Curriculum(TASKS).record("nope", True)
