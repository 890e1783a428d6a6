"""Per-model token prices and the cost of a call.

Prices are USD per million tokens, with three separate rates: uncached input, cached input (prompt
cache hits) and output. ``prompt_tokens`` counts *all* input tokens and ``cached_tokens`` the cached
subset, as in the OpenAI usage block and ATIF, so::

    cost = (prompt - cached) * input + cached * cached_input + completion * output   (all / 1e6)

The built-in table holds list prices published by OpenAI on its pricing page
(https://platform.openai.com/docs/pricing) for a few common models; they drift, so a config may carry
its own :class:`ModelPrice` (``[price]`` in a policy TOML file) and programs may call
:func:`register_price`. An unknown model costs 0 and is flagged (``priced=False``) so that reports can
say "cost unknown" rather than "free". Self-hosted endpoints (vLLM, SGLang) are unknown by default.
"""

from __future__ import annotations

import re
import threading

from pydantic import BaseModel, ConfigDict, Field

from ridgeline.policies.base import Usage


class ModelPrice(BaseModel):
    """USD per million tokens."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    input: float = Field(ge=0)
    cached_input: float = Field(ge=0)
    output: float = Field(ge=0)

    def cost(self, usage: Usage) -> float:
        cached = min(usage.cached_tokens, usage.prompt_tokens)
        uncached = usage.prompt_tokens - cached
        return (
            uncached * self.input + cached * self.cached_input + usage.completion_tokens * self.output
        ) / 1e6


def _p(inp: float, cached: float, out: float) -> ModelPrice:
    return ModelPrice(input=inp, cached_input=cached, output=out)


_PRICES: dict[str, ModelPrice] = {
    "gpt-4o": _p(2.50, 1.25, 10.00),
    "gpt-4o-mini": _p(0.15, 0.075, 0.60),
    "gpt-4.1": _p(2.00, 0.50, 8.00),
    "gpt-4.1-mini": _p(0.40, 0.10, 1.60),
    "gpt-4.1-nano": _p(0.10, 0.025, 0.40),
    "o3": _p(2.00, 0.50, 8.00),
    "o3-mini": _p(1.10, 0.55, 4.40),
    "o4-mini": _p(1.10, 0.275, 4.40),
    "gpt-5": _p(1.25, 0.125, 10.00),
    "gpt-5-mini": _p(0.25, 0.025, 2.00),
    "gpt-5-nano": _p(0.05, 0.005, 0.40),
}
_lock = threading.Lock()
_DATED = re.compile(r"-\d{4}-\d{2}-\d{2}$")


def register_price(model: str, price: ModelPrice) -> None:
    """Add or override the price of ``model`` (exact name, without a provider prefix)."""
    with _lock:
        _PRICES[model.lower()] = price


def price_for(model: str) -> ModelPrice | None:
    """The price of ``model``, or None when unknown.

    Lookup is case-insensitive, ignores a provider prefix (``openai/gpt-4o``) and a dated snapshot
    suffix (``gpt-4o-2024-08-06`` -> ``gpt-4o``).
    """
    name = model.lower().rsplit("/", 1)[-1]
    with _lock:
        return _PRICES.get(name) or _PRICES.get(_DATED.sub("", name))


def cost_usd(model: str, usage: Usage, override: ModelPrice | None = None) -> tuple[float, bool]:
    """``(cost, priced)`` for ``usage`` on ``model``; ``(0.0, False)`` when the model is unknown."""
    price = override or price_for(model)
    if price is None:
        return 0.0, False
    return price.cost(usage), True
