"""Group-relative advantage estimators: GRPO, Dr.GRPO and RLOO.

A *group* is the :math:`n` rollouts of one task from one starting state. Each estimator turns the
group's rewards :math:`r_1..r_n` into one advantage per rollout; the loss broadcasts it to every
trainable token of that rollout (outcome supervision).

* **GRPO** (Shao et al. 2024, "DeepSeekMath", §4.1.2):
  :math:`A_i = (r_i - \\operatorname{mean}(r)) / (\\operatorname{std}(r) + \\epsilon)`.
  ``std`` is the sample standard deviation (:math:`n-1` in the denominator, ``ddof=1``), as in
  the widely used PyTorch implementations; ``ddof=0`` gives the population one.
* **Dr.GRPO** (Liu et al. 2025, "Understanding R1-Zero-Like Training: A Critical Perspective"):
  :math:`A_i = r_i - \\operatorname{mean}(r)`. The std division is dropped because it up-weights
  groups that are nearly all right or all wrong (a question-difficulty bias); the paper also drops the
  per-sequence length normalisation, which is the loss's ``aggregation="constant"``
  (:mod:`ridgeline.train.losses`).
* **RLOO** (Ahmadian et al. 2024, "Back to Basics: Revisiting REINFORCE Style Optimization for
  Learning from Human Feedback in LLMs"; after Kool et al. 2019, "Buy 4 REINFORCE Samples, Get a
  Baseline for Free!"):
  :math:`A_i = r_i - \\frac{1}{n-1}\\sum_{j \\ne i} r_j = \\frac{n}{n-1}(r_i - \\operatorname{mean}(r))`.

**Infrastructure failures.** A rollout whose trial ended in ``infra_fail`` (or whose reward is None)
says nothing about the policy. It is *excluded*: it gets advantage 0, ``included = False`` (the loss
masks it out entirely) and it is left out of the group's mean, std and :math:`n`. A group with fewer
than two included rollouts has no baseline: every advantage is 0.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

Estimator = Literal["grpo", "dr_grpo", "rloo"]

#: The trial status that is never scored and never enters group statistics.
INFRA_FAIL = "infra_fail"


@dataclass(frozen=True)
class Advantages:
    """Per-rollout advantages and whether each rollout takes part in the loss."""

    values: tuple[float, ...]
    included: tuple[bool, ...]

    def __len__(self) -> int:
        return len(self.values)


def _included(rewards: Sequence[float | None], excluded: Sequence[bool] | None) -> list[bool]:
    if excluded is not None and len(excluded) != len(rewards):
        raise ValueError(f"got {len(excluded)} exclusion flags for {len(rewards)} rewards")
    out = []
    for i, r in enumerate(rewards):
        if r is None or (excluded is not None and excluded[i]):
            out.append(False)
            continue
        if not math.isfinite(r):
            raise ValueError(f"reward {i} is not finite ({r!r}); mark the rollout excluded instead")
        out.append(True)
    return out


def group_advantages(
    rewards: Sequence[float | None],
    estimator: Estimator = "grpo",
    *,
    excluded: Sequence[bool] | None = None,
    eps: float = 1e-6,
    ddof: int = 1,
) -> Advantages:
    """Advantages for one group (formulas in the module docstring).

    Args:
        rewards: One reward per rollout; None marks a rollout without a reward (excluded).
        estimator: ``"grpo"``, ``"dr_grpo"`` or ``"rloo"``.
        excluded: Optional flags, True for rollouts to leave out (e.g. ``status == "infra_fail"``).
        eps: Added to the std in GRPO.
        ddof: Delta degrees of freedom of the GRPO std (1 = sample std).

    Returns:
        Advantages aligned with ``rewards``.

    Raises:
        ValueError: mismatched lengths, a non-finite reward, or an unknown estimator.

    Example:
        >>> group_advantages([1.0, 0.0, 0.0, 1.0], "dr_grpo").values
        (0.5, -0.5, -0.5, 0.5)
    """
    included = _included(rewards, excluded)
    kept = [float(r) for r, ok in zip(rewards, included, strict=True) if ok and r is not None]
    n = len(kept)
    zeros = tuple(0.0 for _ in rewards)
    if n < 2:
        return Advantages(zeros, tuple(included))
    mean = math.fsum(kept) / n
    if estimator == "grpo":
        if n - ddof <= 0:
            return Advantages(zeros, tuple(included))
        std = math.sqrt(math.fsum((r - mean) ** 2 for r in kept) / (n - ddof))
        scale = 1.0 / (std + eps)
    elif estimator == "dr_grpo":
        scale = 1.0
    elif estimator == "rloo":
        scale = n / (n - 1)
    else:
        raise ValueError(f"unknown advantage estimator {estimator!r} (expected grpo, dr_grpo or rloo)")
    values = tuple(
        (float(r) - mean) * scale if ok and r is not None else 0.0
        for r, ok in zip(rewards, included, strict=True)
    )
    return Advantages(values, tuple(included))


def batch_advantages(
    rewards: Sequence[float | None],
    group_ids: Sequence[object],
    estimator: Estimator = "grpo",
    *,
    statuses: Sequence[str] | None = None,
    eps: float = 1e-6,
    ddof: int = 1,
) -> Advantages:
    """Advantages for a flat batch whose rollouts carry group ids (any hashable; order is kept).

    Rollouts with ``statuses[i] == "infra_fail"`` are excluded (see the module docstring).

    Raises:
        ValueError: mismatched lengths or a non-finite reward.
    """
    if len(group_ids) != len(rewards) or (statuses is not None and len(statuses) != len(rewards)):
        raise ValueError("rewards, group_ids and statuses must have the same length")
    excluded = [s == INFRA_FAIL for s in statuses] if statuses is not None else [False] * len(rewards)
    members: dict[object, list[int]] = {}
    for i, g in enumerate(group_ids):
        members.setdefault(g, []).append(i)
    values = [0.0] * len(rewards)
    included = [False] * len(rewards)
    for idx in members.values():
        adv = group_advantages(
            [rewards[i] for i in idx], estimator, excluded=[excluded[i] for i in idx], eps=eps, ddof=ddof
        )
        for k, i in enumerate(idx):
            values[i] = adv.values[k]
            included[i] = adv.included[k]
    return Advantages(tuple(values), tuple(included))
