"""Training: advantages, losses, dynamic sampling, curriculum (the trainer builds on these).

The torch-free parts are imported here. The losses need the ``train`` extra (torch) and load on first
use, so ``import ridgeline.train`` works without torch::

    from ridgeline.train import group_advantages          # pure Python
    from ridgeline.train.losses import clipped_policy_loss  # needs torch
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ridgeline.train.advantages import INFRA_FAIL, Advantages, Estimator, batch_advantages, group_advantages
from ridgeline.train.curriculum import Curriculum, CurriculumConfig, StageConfig, TaskInfo
from ridgeline.train.sampling import DynamicSampler

if TYPE_CHECKING:
    from ridgeline.train.losses import (
        Aggregation,
        PolicyLossOutput,
        aggregate,
        clipped_policy_loss,
        k3_kl,
        loss_mask,
    )

_LOSSES = {"Aggregation", "PolicyLossOutput", "aggregate", "clipped_policy_loss", "k3_kl", "loss_mask"}

__all__ = [
    "INFRA_FAIL",
    "Advantages",
    "Aggregation",
    "Curriculum",
    "CurriculumConfig",
    "DynamicSampler",
    "Estimator",
    "PolicyLossOutput",
    "StageConfig",
    "TaskInfo",
    "aggregate",
    "batch_advantages",
    "clipped_policy_loss",
    "group_advantages",
    "k3_kl",
    "loss_mask",
]


def __getattr__(name: str) -> Any:
    if name in _LOSSES:
        from ridgeline.train import losses

        return getattr(losses, name)
    raise AttributeError(f"module 'ridgeline.train' has no attribute {name!r}")
