"""Outcome reward: the verifier's verdict turned into one number.

A verifier writes either ``reward.txt`` (one number) or ``reward.json`` (named numbers, e.g.
``{"tests": 0.8, "style": 1.0}``). :func:`outcome_reward` reduces either to one float:

* a number is used as is;
* named components are reduced by ``aggregation``:

  - ``"auto"`` (default): the value of the ``key`` component (default ``"reward"``) when present,
    otherwise the unweighted mean of all components;
  - ``"key"``: the ``key`` component, which must be present;
  - ``"mean"``: :math:`\\frac{1}{n}\\sum_i c_i`;
  - ``"weighted"``: :math:`\\sum_i w_i c_i / \\sum_i w_i` over the components named in ``weights``
    (every weighted component must be present; others are ignored);
  - ``"min"``: :math:`\\min_i c_i` (all-or-nothing grading: the weakest check decides);
  - ``"sum"``: :math:`\\sum_i c_i`.

Malformed verifier output (no components, a non-number, NaN or infinity) raises
:class:`~ridgeline.errors.VerifierError` naming the offending component.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Literal

from ridgeline.errors import ConfigError, VerifierError

OutcomeAggregation = Literal["auto", "key", "mean", "weighted", "min", "sum"]

#: What a verifier produces: one number, or named numbers.
VerifierOutput = float | int | Mapping[str, float | int]


def _finite(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise VerifierError(f"verifier reward {name!r} must be a number, got {value!r}")
    out = float(value)
    if not math.isfinite(out):
        raise VerifierError(f"verifier reward {name!r} must be finite, got {out!r}")
    return out


def outcome_reward(
    output: VerifierOutput,
    *,
    aggregation: OutcomeAggregation = "auto",
    key: str = "reward",
    weights: Mapping[str, float] | None = None,
) -> float:
    """Reduce a verifier's output to one reward (see the module docstring for each aggregation).

    Args:
        output: A number, or a mapping of component names to numbers.
        aggregation: How named components are reduced; ignored for a plain number.
        key: The component used by ``"auto"`` and ``"key"``.
        weights: Component weights for ``"weighted"`` (required there, ignored otherwise).

    Returns:
        The outcome reward.

    Raises:
        VerifierError: the output is empty, not numeric, not finite, or lacks a required component.
        ConfigError: ``"weighted"`` without usable weights.

    Example:
        >>> outcome_reward({"tests": 1.0, "lint": 0.5})
        0.75
        >>> outcome_reward({"reward": 0.2, "tests": 1.0})
        0.2
    """
    if not isinstance(output, Mapping):
        return _finite("reward", output)
    if not output:
        raise VerifierError("verifier reward.json has no components: expected at least one named number")
    values = {str(name): _finite(str(name), value) for name, value in output.items()}
    if aggregation == "auto":
        return values[key] if key in values else math.fsum(values.values()) / len(values)
    if aggregation == "key":
        if key not in values:
            raise VerifierError(
                f"verifier reward.json has no {key!r} component (has: {', '.join(sorted(values))})"
            )
        return values[key]
    if aggregation == "mean":
        return math.fsum(values.values()) / len(values)
    if aggregation == "min":
        return min(values.values())
    if aggregation == "sum":
        return math.fsum(values.values())
    if aggregation == "weighted":
        if not weights:
            raise ConfigError("outcome aggregation 'weighted' needs a non-empty 'weights' table")
        missing = sorted(set(weights) - set(values))
        if missing:
            raise VerifierError(
                f"verifier reward.json lacks weighted component(s) {', '.join(missing)} "
                f"(has: {', '.join(sorted(values))})"
            )
        total_weight = math.fsum(weights.values())
        if total_weight <= 0:
            raise ConfigError("outcome 'weights' must sum to a positive number")
        return math.fsum(w * values[name] for name, w in weights.items()) / total_weight
    raise ConfigError(f"unknown outcome aggregation {aggregation!r}")
