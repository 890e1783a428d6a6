"""Policy-gradient losses: PPO-style clipped surrogate with clip-higher, token aggregation, k3 KL.

All tensors are ``[B, T]`` (rollouts × tokens) unless noted; ``logprobs`` are the log-probabilities
of the tokens actually generated. Per token :math:`t` of rollout :math:`i`, with
:math:`\\rho = \\exp(\\log\\pi_\\theta - \\log\\pi_{old})`:

**Clipped surrogate with asymmetric clipping** (PPO, Schulman et al. 2017; clip-higher from DAPO,
Yu et al. 2025, which decouples :math:`\\epsilon_{low}` and :math:`\\epsilon_{high}` (0.2 and 0.28 in the
paper) so that low-probability tokens can grow and entropy does not collapse):

.. math::
    \\ell^{pg}_{i,t} = -\\min\\big(\\rho A_i,\\ \\operatorname{clip}(\\rho, 1-\\epsilon_{low},
    1+\\epsilon_{high})\\,A_i\\big)

**KL to a reference model** (optional, ``kl_coef > 0``), with the k3 estimator of Schulman 2020
("Approximating KL Divergence"), unbiased and always :math:`\\ge 0`; as in GRPO (Shao et al. 2024) it
is added per token:

.. math::
    r = \\log\\pi_{ref} - \\log\\pi_\\theta, \\qquad k_3 = e^{r} - r - 1, \\qquad
    \\ell_{i,t} = \\ell^{pg}_{i,t} + \\beta\\, k_3

**Aggregation** over the trainable tokens :math:`m_{i,t} = 1` (``aggregation``):

* ``"token_mean"`` (DAPO's token-level loss): :math:`\\sum_{i,t} m\\,\\ell / \\sum_{i,t} m`; every
  token weighs the same, so long rollouts are not down-weighted.
* ``"sequence_mean"`` (the original GRPO): :math:`\\frac{1}{|I|}\\sum_{i \\in I} \\sum_t m\\,\\ell /
  \\sum_t m` over rollouts :math:`I` with at least one trainable token.
* ``"constant"`` (Dr.GRPO, Liu et al. 2025): :math:`\\sum_{i,t} m\\,\\ell / (B \\cdot L)` with a fixed
  ``norm_constant`` :math:`L` (e.g. the generation budget), so no length bias enters the gradient.

**Masks.** ``mask`` is 1 on tokens the policy generated and 0 on prompt, tool-output and environment
tokens and padding. ``sequence_mask`` (per rollout) removes whole rollouts: excluded ``infra_fail``
trials and truncated episodes; :func:`loss_mask` combines them. Masked positions are replaced by 0
*before* any arithmetic, so they contribute exactly zero loss and zero gradient, even if they hold
``-inf``.

**Statistics** (floats, over trainable tokens): ``clip_fraction`` (share of tokens where the clipped
branch is active, split into ``clip_low_fraction`` / ``clip_high_fraction``), ``approx_kl`` (k3 of
:math:`\\pi_\\theta` from :math:`\\pi_{old}`, with :math:`r = \\log\\pi_\\theta - \\log\\pi_{old}`
since the tokens were sampled from :math:`\\pi_{old}`), ``kl_ref``, ``ratio_mean``, ``ratio_max``,
``entropy`` (when ``logits`` are given), ``pg_loss``, ``tokens``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from ridgeline._extras import require

if TYPE_CHECKING:
    import torch
else:
    torch = require("torch", "train")

Aggregation = Literal["token_mean", "sequence_mean", "constant"]


@dataclass
class PolicyLossOutput:
    """The scalar loss to backpropagate and floats to log."""

    loss: torch.Tensor
    stats: dict[str, float] = field(default_factory=dict)


def loss_mask(
    token_mask: torch.Tensor,
    *,
    included: torch.Tensor | None = None,
    truncated: torch.Tensor | None = None,
) -> torch.Tensor:
    """Boolean ``[B, T]`` mask: generated tokens of rollouts that are included and not truncated.

    Args:
        token_mask: ``[B, T]``, nonzero on tokens the policy generated.
        included: ``[B]``, False for excluded rollouts (``infra_fail``); see
            :class:`ridgeline.train.advantages.Advantages`.
        truncated: ``[B]``, True for episodes cut off by a step, token or time limit.
    """
    mask = token_mask.bool()
    if included is not None:
        mask = mask & included.bool().unsqueeze(-1)
    if truncated is not None:
        mask = mask & ~truncated.bool().unsqueeze(-1)
    return mask


def k3_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Per-token k3 estimate of :math:`KL(\\pi_\\theta \\| \\pi_{ref})`: :math:`e^r - r - 1`, r = ref - logp.

    Schulman 2020, "Approximating KL Divergence". The tokens must be sampled from :math:`\\pi_\\theta`.
    """
    r = ref_logprobs - logprobs
    return torch.exp(r) - r - 1.0


def aggregate(
    values: torch.Tensor,
    mask: torch.Tensor,
    aggregation: Aggregation = "token_mean",
    *,
    norm_constant: float | None = None,
) -> torch.Tensor:
    """Reduce per-token values ``[B, T]`` to a scalar over ``mask`` (formulas in the module docstring).

    Raises:
        ValueError: unknown aggregation, or ``"constant"`` without a positive ``norm_constant``.
    """
    m = mask.to(values.dtype)
    masked = torch.where(mask.bool(), values, torch.zeros_like(values))
    if aggregation == "token_mean":
        return masked.sum() / m.sum().clamp(min=1.0)
    if aggregation == "sequence_mean":
        per_token = m.sum(dim=-1)
        has_tokens = per_token > 0
        per_seq = masked.sum(dim=-1) / per_token.clamp(min=1.0)
        return (per_seq * has_tokens.to(values.dtype)).sum() / has_tokens.sum().clamp(min=1).to(values.dtype)
    if aggregation == "constant":
        if norm_constant is None or norm_constant <= 0:
            raise ValueError(
                "aggregation 'constant' (Dr.GRPO) needs a positive norm_constant, e.g. max new tokens"
            )
        return masked.sum() / (values.shape[0] * norm_constant)
    raise ValueError(f"unknown aggregation {aggregation!r} (expected token_mean, sequence_mean or constant)")


def _entropy(logits: torch.Tensor) -> torch.Tensor:
    logp = torch.log_softmax(logits.float(), dim=-1)
    p = logp.exp()
    return -torch.where(p > 0, p * logp, torch.zeros_like(p)).sum(dim=-1)


def _masked_mean(values: torch.Tensor, mask: torch.Tensor) -> float:
    n = int(mask.sum().item())
    if n == 0:
        return 0.0
    return float(torch.where(mask, values, torch.zeros_like(values)).sum().item() / n)


def clipped_policy_loss(
    logprobs: torch.Tensor,
    advantages: torch.Tensor,
    mask: torch.Tensor,
    *,
    old_logprobs: torch.Tensor | None = None,
    eps_low: float = 0.2,
    eps_high: float = 0.2,
    aggregation: Aggregation = "token_mean",
    norm_constant: float | None = None,
    ref_logprobs: torch.Tensor | None = None,
    kl_coef: float = 0.0,
    sequence_mask: torch.Tensor | None = None,
    logits: torch.Tensor | None = None,
) -> PolicyLossOutput:
    """The clipped surrogate loss with optional k3 KL (see the module docstring).

    Args:
        logprobs: ``[B, T]`` log-probs of the generated tokens under the current policy (with grad).
        advantages: ``[B]`` per rollout, or ``[B, T]`` per token.
        mask: ``[B, T]``, nonzero on trainable tokens.
        old_logprobs: ``[B, T]`` under the policy that sampled; None = on-policy (ratio 1).
        eps_low: Lower clip range, :math:`\\rho \\ge 1 - \\epsilon_{low}`.
        eps_high: Upper clip range, :math:`\\rho \\le 1 + \\epsilon_{high}` (DAPO uses 0.28).
        aggregation: ``"token_mean"``, ``"sequence_mean"`` or ``"constant"``.
        norm_constant: :math:`L` for ``"constant"``.
        ref_logprobs: ``[B, T]`` under the reference model; needed when ``kl_coef > 0``.
        kl_coef: :math:`\\beta`, the weight of the k3 KL term.
        sequence_mask: ``[B]``, False removes a whole rollout.
        logits: ``[B, T, V]``, only for the ``entropy`` statistic.

    Raises:
        ValueError: inconsistent shapes or options.
    """
    if logprobs.dim() != 2 or mask.shape != logprobs.shape:
        raise ValueError(
            f"logprobs and mask must both be [B, T], got {tuple(logprobs.shape)} and {tuple(mask.shape)}"
        )
    for name, other in (("old_logprobs", old_logprobs), ("ref_logprobs", ref_logprobs)):
        if other is not None and other.shape != logprobs.shape:
            raise ValueError(f"{name} has shape {tuple(other.shape)}, expected {tuple(logprobs.shape)}")
    if not (0.0 <= eps_low < 1.0 and eps_high >= 0.0):
        raise ValueError(
            f"need 0 <= eps_low < 1 and eps_high >= 0, got eps_low={eps_low}, eps_high={eps_high}"
        )
    if kl_coef < 0:
        raise ValueError(f"kl_coef must be >= 0, got {kl_coef}")
    if kl_coef > 0 and ref_logprobs is None:
        raise ValueError("kl_coef > 0 needs ref_logprobs from the reference model")

    m = mask.bool()
    if sequence_mask is not None:
        m = m & sequence_mask.bool().unsqueeze(-1)
    zeros = torch.zeros_like(logprobs)
    logp = torch.where(m, logprobs, zeros)
    old = logp.detach() if old_logprobs is None else torch.where(m, old_logprobs.detach(), zeros)
    adv = advantages.detach().to(logprobs.dtype)
    if adv.shape == logprobs.shape[:1]:
        adv = adv.unsqueeze(-1).expand_as(logprobs)
    elif adv.shape != logprobs.shape:
        raise ValueError(
            f"advantages must be [B] or [B, T] with [B, T] = {list(logprobs.shape)}, "
            f"got {list(advantages.shape)}"
        )
    adv = torch.where(m, adv, zeros)

    log_ratio = logp - old
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - eps_low, 1.0 + eps_high)
    pg = -torch.minimum(ratio * adv, clipped * adv)
    per_token = pg
    kl_ref: torch.Tensor | None = None
    if ref_logprobs is not None:
        kl_ref = k3_kl(logp, torch.where(m, ref_logprobs.detach(), zeros))
        if kl_coef > 0:
            per_token = pg + kl_coef * kl_ref
    loss = aggregate(per_token, m, aggregation, norm_constant=norm_constant)

    with torch.no_grad():
        high = m & (adv > 0) & (ratio > 1.0 + eps_high)
        low = m & (adv < 0) & (ratio < 1.0 - eps_low)
        n_tokens = int(m.sum().item())
        stats = {
            "loss": float(loss.item()),
            "pg_loss": float(aggregate(pg, m, aggregation, norm_constant=norm_constant).item()),
            "tokens": float(n_tokens),
            "clip_fraction": _masked_mean((high | low).float(), m),
            "clip_high_fraction": _masked_mean(high.float(), m),
            "clip_low_fraction": _masked_mean(low.float(), m),
            "approx_kl": _masked_mean(torch.exp(log_ratio) - 1.0 - log_ratio, m),
            "ratio_mean": _masked_mean(ratio, m),
            "ratio_max": float(torch.where(m, ratio, zeros).max().item()) if n_tokens else 0.0,
        }
        if kl_ref is not None:
            stats["kl_ref"] = _masked_mean(kl_ref, m)
        if logits is not None:
            if logits.shape[:2] != logprobs.shape:
                raise ValueError(f"logits must be [B, T, V], got {tuple(logits.shape)}")
            stats["entropy"] = _masked_mean(_entropy(logits.detach()), m)
    return PolicyLossOutput(loss=loss, stats=stats)
