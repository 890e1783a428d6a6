"""Advantage estimators and dynamic sampling against hand-computed values."""

from __future__ import annotations

import math

import pytest

from ridgeline.train import DynamicSampler, batch_advantages, group_advantages


def approx(values: tuple[float, ...] | list[float]) -> object:
    return pytest.approx(list(values), abs=1e-9)


def test_grpo_on_1001_sample_std() -> None:
    # mean 0.5; sample std sqrt((4 * 0.25) / 3) = sqrt(1/3); A = ±0.5 / sqrt(1/3) = ±sqrt(3)/2
    adv = group_advantages([1.0, 0.0, 0.0, 1.0], "grpo", eps=0.0)
    h = math.sqrt(3) / 2
    assert list(adv.values) == approx([h, -h, -h, h])
    assert adv.included == (True, True, True, True)


def test_grpo_on_1001_population_std_and_eps() -> None:
    # population std 0.5 -> A = ±0.5 / (0.5 + 1e-6)
    adv = group_advantages([1.0, 0.0, 0.0, 1.0], "grpo", ddof=0)
    a = 0.5 / (0.5 + 1e-6)
    assert list(adv.values) == approx([a, -a, -a, a])


def test_dr_grpo_is_mean_baseline_without_std() -> None:
    assert list(group_advantages([1.0, 0.0, 0.0, 1.0], "dr_grpo").values) == approx([0.5, -0.5, -0.5, 0.5])
    # graded rewards keep their scale: mean 0.3 -> [0.6, -0.3, -0.3]
    assert list(group_advantages([0.9, 0.0, 0.0], "dr_grpo").values) == approx([0.6, -0.3, -0.3])


def test_rloo_leave_one_out() -> None:
    # A_0 = 1 - (0 + 0 + 1)/3 = 2/3 ; A_1 = 0 - (1 + 0 + 1)/3 = -2/3
    assert list(group_advantages([1.0, 0.0, 0.0, 1.0], "rloo").values) == approx(
        [2 / 3, -2 / 3, -2 / 3, 2 / 3]
    )
    # [3, 1, 2]: 3 - 1.5 = 1.5 ; 1 - 2.5 = -1.5 ; 2 - 2 = 0
    assert list(group_advantages([3.0, 1.0, 2.0], "rloo").values) == approx([1.5, -1.5, 0.0])


@pytest.mark.parametrize("estimator", ["grpo", "dr_grpo", "rloo"])
def test_constant_group_and_singleton_have_zero_advantage(estimator: str) -> None:
    assert group_advantages([1.0, 1.0, 1.0], estimator).values == (0.0, 0.0, 0.0)  # type: ignore[arg-type]
    assert group_advantages([1.0], estimator).values == (0.0,)  # type: ignore[arg-type]


def test_infra_fail_excluded_from_group_statistics() -> None:
    # the infra-failed rollout's reward (0.0, a meaningless default) must not shift the baseline
    adv = group_advantages([1.0, 0.0, 0.0, 1.0, 0.0], "dr_grpo", excluded=[False, False, False, False, True])
    assert list(adv.values) == approx([0.5, -0.5, -0.5, 0.5, 0.0])
    assert adv.included == (True, True, True, True, False)
    # None rewards are excluded the same way, and n shrinks for RLOO
    adv = group_advantages([1.0, None, 0.0], "rloo")
    assert list(adv.values) == approx([1.0, 0.0, -1.0])
    assert adv.included == (True, False, True)


def test_group_with_one_valid_rollout_has_no_baseline() -> None:
    adv = group_advantages([1.0, None, None], "grpo")
    assert adv.values == (0.0, 0.0, 0.0)
    assert adv.included == (True, False, False)


def test_batch_advantages_by_group_and_status() -> None:
    rewards = [1.0, 0.0, 5.0, 1.0, 0.0, 2.0]
    groups = ["a", "a", "a", "b", "b", "b"]
    statuses = ["ok", "ok", "infra_fail", "ok", "step_limit", "ok"]
    adv = batch_advantages(rewards, groups, "dr_grpo", statuses=statuses)
    # group a without the infra failure: mean 0.5 ; group b: mean 1.0 (step_limit is a real failure)
    assert list(adv.values) == approx([0.5, -0.5, 0.0, 0.0, -1.0, 1.0])
    assert adv.included == (True, True, False, True, True, True)


def test_invalid_inputs_are_rejected() -> None:
    with pytest.raises(ValueError, match="not finite"):
        group_advantages([1.0, float("nan")])
    with pytest.raises(ValueError, match="exclusion flags"):
        group_advantages([1.0, 0.0], excluded=[True])
    with pytest.raises(ValueError, match="unknown advantage estimator"):
        group_advantages([1.0, 0.0], "ppo")  # type: ignore[arg-type]


def test_dynamic_sampler_drops_flat_groups_and_refills_within_budget() -> None:
    sampler = DynamicSampler(budget=3, target_groups=4)
    first_round = [[1.0, 0.0], [1.0, 1.0], [0.0, 0.0], [0.5, 0.25]]
    assert [sampler.accept(g) for g in first_round] == [True, False, False, True]
    assert sampler.request_refills() == 2  # two short of the target
    assert sampler.accept([0.0, 1.0]) is True
    assert sampler.accept([None, 1.0]) is False  # one valid rollout: no baseline
    assert sampler.request_refills() == 1  # one short, one unit of budget left
    assert sampler.accept([0.0, 0.0]) is False
    assert sampler.request_refills() == 0  # budget spent: train on the 3 accepted groups
    stats = sampler.stats()
    assert stats["seen"] == 7
    assert stats["accepted"] == 3
    assert stats["dropped_no_variance"] == 3
    assert stats["dropped_too_few_valid"] == 1
    assert stats["drop_rate"] == pytest.approx(4 / 7)
    assert stats["budget_left"] == 0
    sampler.new_batch()
    assert sampler.budget_left == 3
    assert sampler.stats()["seen"] == 7  # run totals survive the batch
    restored = DynamicSampler.from_dict(sampler.to_dict())
    assert restored.stats() == sampler.stats()


def test_dynamic_sampler_tolerance_and_validation() -> None:
    sampler = DynamicSampler(budget=0, tol=0.1)
    assert sampler.accept([0.5, 0.55]) is False
    assert sampler.accept([0.5, 0.7]) is True
    assert sampler.request_refills() == 0  # no target: filtering only
    with pytest.raises(ValueError, match="budget"):
        DynamicSampler(budget=-1)
    with pytest.raises(ValueError, match="min_valid"):
        DynamicSampler(budget=1, min_valid=1)
