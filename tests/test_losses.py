"""The clipped surrogate, aggregation modes, k3 KL and masks against hand-computed values."""

from __future__ import annotations

import math

import pytest
import torch

from ridgeline.train.advantages import group_advantages
from ridgeline.train.losses import aggregate, clipped_policy_loss, k3_kl, loss_mask

RATIOS = [0.7, 0.9, 1.2, 1.4]


def _ratio_inputs(advantage: float) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    logp = torch.tensor([[math.log(r) for r in RATIOS]], dtype=torch.float64, requires_grad=True)
    old = torch.zeros(1, 4, dtype=torch.float64)
    adv = torch.tensor([advantage], dtype=torch.float64)
    mask = torch.ones(1, 4, dtype=torch.bool)
    return logp, old, adv, mask


def test_clip_higher_positive_advantage() -> None:
    logp, old, adv, mask = _ratio_inputs(1.0)
    out = clipped_policy_loss(logp, adv, mask, old_logprobs=old, eps_low=0.2, eps_high=0.28)
    # -min(rho, clip(rho, 0.8, 1.28)) per token: -0.7, -0.9, -1.2, -1.28 ; token mean
    assert out.loss.item() == pytest.approx(-(0.7 + 0.9 + 1.2 + 1.28) / 4)
    assert out.stats["clip_high_fraction"] == pytest.approx(0.25)
    assert out.stats["clip_low_fraction"] == 0.0
    assert out.stats["clip_fraction"] == pytest.approx(0.25)
    out.loss.backward()
    # d/dlogp of -rho*A/4 is -rho/4 on unclipped tokens; the clipped token gets no gradient
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == pytest.approx([-0.7 / 4, -0.9 / 4, -1.2 / 4, 0.0])


def test_symmetric_clip_differs_from_clip_higher() -> None:
    logp, old, adv, mask = _ratio_inputs(1.0)
    out = clipped_policy_loss(logp, adv, mask, old_logprobs=old, eps_low=0.2, eps_high=0.2)
    assert out.loss.item() == pytest.approx(-(0.7 + 0.9 + 1.2 + 1.2) / 4)


def test_clip_low_negative_advantage() -> None:
    logp, old, adv, mask = _ratio_inputs(-1.0)
    out = clipped_policy_loss(logp, adv, mask, old_logprobs=old, eps_low=0.2, eps_high=0.28)
    # -min(-rho, -clip(rho)) = max(rho, clip(rho)): 0.8, 0.9, 1.2, 1.4
    assert out.loss.item() == pytest.approx((0.8 + 0.9 + 1.2 + 1.4) / 4)
    assert out.stats["clip_low_fraction"] == pytest.approx(0.25)
    assert out.stats["clip_high_fraction"] == 0.0
    out.loss.backward()
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == pytest.approx([0.0, 0.9 / 4, 1.2 / 4, 1.4 / 4])


def test_approx_kl_and_ratio_stats() -> None:
    logp, old, adv, mask = _ratio_inputs(1.0)
    out = clipped_policy_loss(logp, adv, mask, old_logprobs=old)
    expected = sum(r - 1 - math.log(r) for r in RATIOS) / 4
    assert out.stats["approx_kl"] == pytest.approx(expected)
    assert out.stats["ratio_mean"] == pytest.approx(sum(RATIOS) / 4)
    assert out.stats["ratio_max"] == pytest.approx(1.4)
    assert out.stats["tokens"] == 4


def test_aggregation_token_vs_sequence_vs_constant() -> None:
    values = torch.tensor([[1.0, 7.0, 7.0], [3.0, 3.0, 3.0]])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    assert aggregate(values, mask, "token_mean").item() == pytest.approx((1 + 9) / 4)
    assert aggregate(values, mask, "sequence_mean").item() == pytest.approx((1 + 3) / 2)
    assert aggregate(values, mask, "constant", norm_constant=4).item() == pytest.approx(10 / (2 * 4))
    with pytest.raises(ValueError, match="norm_constant"):
        aggregate(values, mask, "constant")


def test_token_level_loss_weighs_long_rollouts_more() -> None:
    # on-policy (ratio 1): per-token loss is -A. Rollout 0: A=+1, 1 token; rollout 1: A=-1, 3 tokens.
    logp = torch.zeros(2, 3, requires_grad=True)
    adv = torch.tensor([1.0, -1.0])
    mask = torch.tensor([[1, 0, 0], [1, 1, 1]], dtype=torch.bool)
    token = clipped_policy_loss(logp, adv, mask, aggregation="token_mean")
    assert token.loss.item() == pytest.approx(-(1 - 3) / 4)
    token.loss.backward()
    assert logp.grad is not None
    assert logp.grad.flatten().tolist() == pytest.approx([-0.25, 0, 0, 0.25, 0.25, 0.25])
    logp.grad = None
    seq = clipped_policy_loss(logp, adv, mask, aggregation="sequence_mean")
    assert seq.loss.item() == pytest.approx(0.0)
    seq.loss.backward()
    assert logp.grad.flatten().tolist() == pytest.approx([-0.5, 0, 0, 1 / 6, 1 / 6, 1 / 6])


def test_k3_value() -> None:
    # r = log 0.25 - log 0.5 = log 0.5 ; k3 = 0.5 - log 0.5 - 1 = log 2 - 0.5
    logp = torch.tensor([math.log(0.5)], dtype=torch.float64)
    ref = torch.tensor([math.log(0.25)], dtype=torch.float64)
    assert k3_kl(logp, ref).item() == pytest.approx(math.log(2) - 0.5)
    assert k3_kl(ref, ref).item() == 0.0


def test_kl_term_added_per_token() -> None:
    logp = torch.full((1, 2), math.log(0.5), dtype=torch.float64, requires_grad=True)
    ref = torch.full((1, 2), math.log(0.25), dtype=torch.float64)
    mask = torch.ones(1, 2, dtype=torch.bool)
    out = clipped_policy_loss(logp, torch.zeros(1, dtype=torch.float64), mask, ref_logprobs=ref, kl_coef=0.1)
    assert out.loss.item() == pytest.approx(0.1 * (math.log(2) - 0.5))
    assert out.stats["kl_ref"] == pytest.approx(math.log(2) - 0.5)
    out.loss.backward()
    # d k3 / d logp = -exp(r) + 1 = 0.5 per token ; times beta / 2 tokens
    assert logp.grad is not None
    assert logp.grad.tolist()[0] == pytest.approx([0.1 * 0.5 / 2, 0.1 * 0.5 / 2])
    with pytest.raises(ValueError, match="ref_logprobs"):
        clipped_policy_loss(logp, torch.zeros(1), mask, kl_coef=0.1)


def test_masked_tokens_get_zero_gradient_even_when_infinite() -> None:
    # tokens 2-3 of rollout 0 are tool output; padding of rollout 1 holds -inf
    logp = torch.tensor([[-1.0, -2.0, -0.5, -0.3], [-1.0, float("-inf"), float("-inf"), float("-inf")]])
    logp.requires_grad_(True)
    old = torch.tensor([[-1.1, -2.0, float("nan"), -0.3], [-0.9, 0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0, 0], [1, 0, 0, 0]], dtype=torch.bool)
    out = clipped_policy_loss(logp, torch.tensor([1.0, -1.0]), mask, old_logprobs=old)
    out.loss.backward()
    assert logp.grad is not None
    assert torch.isfinite(out.loss)
    assert torch.isfinite(logp.grad).all()
    assert logp.grad[0, 2:].tolist() == [0.0, 0.0]
    assert logp.grad[1, 1:].tolist() == [0.0, 0.0, 0.0]
    assert (logp.grad[mask] != 0).all()
    assert out.stats["tokens"] == 3


def test_truncated_and_infra_rollouts_contribute_nothing() -> None:
    adv = group_advantages([1.0, 0.0, 1.0, 0.0], "dr_grpo", excluded=[False, False, False, True])
    included = torch.tensor(adv.included)
    truncated = torch.tensor([False, True, False, False])
    token_mask = torch.ones(4, 3)
    mask = loss_mask(token_mask, included=included, truncated=truncated)
    assert mask.sum(dim=1).tolist() == [3, 0, 3, 0]
    logp = torch.full((4, 3), -1.0, requires_grad=True)
    out = clipped_policy_loss(logp, torch.tensor(adv.values), mask)
    out.loss.backward()
    assert logp.grad is not None
    assert logp.grad[1].abs().sum().item() == 0.0
    assert logp.grad[3].abs().sum().item() == 0.0
    # same via sequence_mask on the raw token mask
    logp.grad = None
    out2 = clipped_policy_loss(
        logp, torch.tensor(adv.values), token_mask, sequence_mask=included & ~truncated
    )
    assert out2.loss.item() == pytest.approx(out.loss.item())


def test_entropy_stat_from_logits() -> None:
    logits = torch.zeros(1, 2, 4)
    logits[0, 1] = torch.tensor([0.0, float("-inf"), float("-inf"), float("-inf")])
    logp = torch.zeros(1, 2, requires_grad=True)
    mask = torch.tensor([[1, 0]], dtype=torch.bool)
    out = clipped_policy_loss(logp, torch.ones(1), mask, logits=logits)
    assert out.stats["entropy"] == pytest.approx(math.log(4))
    out = clipped_policy_loss(logp, torch.ones(1), torch.ones(1, 2, dtype=torch.bool), logits=logits)
    assert out.stats["entropy"] == pytest.approx(math.log(4) / 2)


def test_shape_and_option_errors() -> None:
    logp = torch.zeros(2, 3)
    mask = torch.ones(2, 3, dtype=torch.bool)
    with pytest.raises(ValueError, match="old_logprobs"):
        clipped_policy_loss(logp, torch.zeros(2), mask, old_logprobs=torch.zeros(2, 2))
    with pytest.raises(ValueError, match="advantages"):
        clipped_policy_loss(logp, torch.zeros(3), mask)
    with pytest.raises(ValueError, match="eps_low"):
        clipped_policy_loss(logp, torch.zeros(2), mask, eps_low=1.0)
    with pytest.raises(ValueError, match="\\[B, T\\]"):
        clipped_policy_loss(torch.zeros(3), torch.zeros(3), torch.ones(3))
