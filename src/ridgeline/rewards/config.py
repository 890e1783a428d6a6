"""Composing reward components with weights, and recording every one of them.

A :class:`RewardConfig` names the components in use and their weights (``[reward]`` in a training
config)::

    [reward.outcome]
    weight = 1.0
    aggregation = "auto"
    [reward.checkpoints]
    weight = 0.2
    [reward.repetition]
    weight = 0.05
    [reward.llm_judge]
    weight = 0.1
    rubric = "Full marks for a correct, cited figure; half for the right method."

The total is the weighted sum of the components that have a value,

.. math:: R = \\sum_c w_c \\, v_c, \\qquad w_c \\ge 0,

where outcome, checkpoints, tool validity and judges lie in [0, 1] and the repetition / no-progress
penalties lie in [-1, 0] (so a positive weight subtracts). A component with no data for a trajectory
(a task without checkpoints, a trajectory without tool calls) is recorded with ``value = None`` and
contributes nothing, unless it is marked ``required``, which makes its absence an error. Weights are
not renormalised, so the scale of ``R`` does not jump between tasks that have a component and tasks
that lack it; per-domain normalisation (:mod:`ridgeline.rewards.fusion`) handles scale.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from ridgeline.errors import ConfigError
from ridgeline.rewards.judges import CompleteFn, LLMJudge, Rule, RuleJudge
from ridgeline.rewards.outcome import OutcomeAggregation, VerifierOutput, outcome_reward
from ridgeline.rewards.process import (
    Action,
    CheckpointResult,
    checkpoint_score,
    no_progress_penalty,
    repetition_penalty,
    tool_call_validity,
)

_STRICT = ConfigDict(extra="forbid", frozen=True)


class ComponentConfig(BaseModel):
    """A component's weight, and whether a trajectory lacking it is an error."""

    model_config = _STRICT

    weight: float = Field(default=1.0, ge=0, allow_inf_nan=False)
    required: bool = False


class OutcomeConfig(ComponentConfig):
    """The verifier's reward; see :func:`ridgeline.rewards.outcome.outcome_reward`."""

    required: bool = True
    aggregation: OutcomeAggregation = "auto"
    key: str = "reward"
    weights: dict[str, float] | None = None

    @model_validator(mode="after")
    def _weights_needed(self) -> OutcomeConfig:
        if self.aggregation == "weighted" and not self.weights:
            raise ValueError("aggregation 'weighted' needs a 'weights' table naming verifier components")
        if self.aggregation != "weighted" and self.weights:
            raise ValueError(f"'weights' would do nothing with aggregation {self.aggregation!r}")
        return self


class RuleJudgeConfig(ComponentConfig):
    """A rule-based judge; see :class:`ridgeline.rewards.judges.RuleJudge`."""

    rules: tuple[Rule, ...] = Field(min_length=1)


class LLMJudgeConfig(ComponentConfig):
    """An LLM judge; the model is supplied at scoring time as ``complete``."""

    rubric: str = Field(min_length=1)
    scale: float = Field(default=1.0, gt=0, allow_inf_nan=False)
    default: float | None = Field(default=None, ge=0, le=1)
    include_actions: bool = False


class RewardConfig(BaseModel):
    """Which reward components are used and how much each weighs. Unset sections are off."""

    model_config = _STRICT

    outcome: OutcomeConfig | None = OutcomeConfig()
    checkpoints: ComponentConfig | None = None
    tool_validity: ComponentConfig | None = None
    repetition: ComponentConfig | None = None
    no_progress: ComponentConfig | None = None
    rule_judge: RuleJudgeConfig | None = None
    llm_judge: LLMJudgeConfig | None = None

    @model_validator(mode="after")
    def _something_counts(self) -> RewardConfig:
        if not any(c.weight > 0 for c in self.components().values()):
            raise ValueError("every reward component is off or has weight 0: the reward would always be 0")
        return self

    def components(self) -> dict[str, ComponentConfig]:
        """The enabled components by name."""
        return {
            name: getattr(self, name) for name in type(self).model_fields if getattr(self, name) is not None
        }

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any], *, where: str = "[reward]") -> RewardConfig:
        """Validate a parsed TOML table; errors become one :class:`ConfigError` naming each field.

        Raises:
            ConfigError: unknown keys, wrong types, or a configuration that would do nothing.
        """
        try:
            return cls.model_validate(dict(data))
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(table)'}: {err['msg']}" for err in exc.errors()
            )
            raise ConfigError(f"{where}: {problems}") from None


class ComponentScore(BaseModel):
    """One component's value (None = no data), its weight and its contribution ``weight * value``."""

    model_config = ConfigDict(frozen=True)

    value: float | None
    weight: float
    contribution: float
    detail: dict[str, Any] = Field(default_factory=dict)


class RewardBreakdown(BaseModel):
    """The total reward and every component that went into it (stored with the trajectory)."""

    model_config = ConfigDict(frozen=True)

    total: float
    components: dict[str, ComponentScore]

    def values(self) -> dict[str, float | None]:
        """Component name → value, for metrics."""
        return {name: c.value for name, c in self.components.items()}


def compute_reward(
    config: RewardConfig,
    *,
    verifier_output: VerifierOutput | None = None,
    checkpoints: Sequence[CheckpointResult] = (),
    tool_calls_valid: int = 0,
    tool_calls_total: int = 0,
    actions: Sequence[Action] = (),
    observations: Sequence[str] | None = None,
    answer: str = "",
    instruction: str = "",
    complete: CompleteFn | None = None,
) -> RewardBreakdown:
    """Score one trajectory under ``config``.

    Args:
        config: The components and weights.
        verifier_output: The verifier's reward (a number or named numbers); None when it produced none.
        checkpoints: Results of :func:`~ridgeline.rewards.process.evaluate_checkpoints`.
        tool_calls_valid: Number of valid tool calls.
        tool_calls_total: Number of tool calls.
        actions: The trajectory's actions (tool name, arguments), in order.
        observations: One observation per action; needed by ``no_progress``.
        answer: The agent's final answer (or final message).
        instruction: The task instruction (shown to the LLM judge).
        complete: The LLM judge's model; needed when ``llm_judge`` is configured.

    Returns:
        The total and every component's value, weight and contribution.

    Raises:
        ValueError: a ``required`` component has no data, or ``llm_judge`` is set without ``complete``.
        VerifierError: the verifier output is malformed.
        JudgeParseError: the judge's reply has no score and the judge has no default.
    """
    scores: dict[str, ComponentScore] = {}
    for name, comp in config.components().items():
        value: float | None
        detail: dict[str, Any] = {}
        if name == "outcome":
            assert isinstance(comp, OutcomeConfig)
            value = (
                None
                if verifier_output is None
                else outcome_reward(
                    verifier_output, aggregation=comp.aggregation, key=comp.key, weights=comp.weights
                )
            )
        elif name == "checkpoints":
            value = checkpoint_score(checkpoints)
            detail = {"reached": {c.name: c.reached for c in checkpoints}}
        elif name == "tool_validity":
            value = tool_call_validity(tool_calls_valid, tool_calls_total)
        elif name == "repetition":
            value = repetition_penalty(actions) if actions else None
        elif name == "no_progress":
            value = (
                None if observations is None or not actions else no_progress_penalty(actions, observations)
            )
        elif name == "rule_judge":
            assert isinstance(comp, RuleJudgeConfig)
            result = RuleJudge(comp.rules).score(answer, actions)
            value, detail = result.score, result.detail
        elif name == "llm_judge":
            assert isinstance(comp, LLMJudgeConfig)
            if complete is None:
                raise ValueError(
                    "reward component 'llm_judge' is configured but no 'complete' model was given"
                )
            judge = LLMJudge(
                complete,
                comp.rubric,
                scale=comp.scale,
                default=comp.default,
                include_actions=comp.include_actions,
            )
            result = judge.score(instruction, answer, actions)
            value, detail = result.score, result.detail
        else:  # pragma: no cover - components() only yields the fields above
            raise AssertionError(name)
        if value is None and comp.required:
            raise ValueError(f"reward component {name!r} is required but this trajectory has no data for it")
        contribution = 0.0 if value is None else comp.weight * value
        scores[name] = ComponentScore(
            value=value, weight=comp.weight, contribution=contribution, detail=detail
        )
    total = math.fsum(s.contribution for s in scores.values())
    return RewardBreakdown(total=total, components=scores)
