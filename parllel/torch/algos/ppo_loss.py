"""PPO's objective on one minibatch: the clipped surrogate, the (clipped)
value error and the entropy bonus over the valid steps, with the statistics
PPO logs (docs/torch.md "Semantics")."""

from __future__ import annotations

import math

import torch

from parllel.torch.algos.batch import PolicyBatch
from parllel.torch.algos.evaluator import PolicyEvaluation

__all__ = [
    "STAT_NAMES",
    "clipped_surrogate_loss",
    "explained_variance",
    "masked_mean",
    "normalized_advantage",
]

#: The statistics :func:`clipped_surrogate_loss` returns, in this order.
STAT_NAMES = ("policy_loss", "value_loss", "entropy", "approx_kl", "clip_fraction")


def masked_mean(x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``x`` over the entries where ``mask`` is set (all if None)."""
    if mask is None:
        return x.mean()
    # ``where`` rather than a product: invalid steps may hold anything, even NaN.
    total = torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
    return total.sum() / mask.sum().clamp(min=1).to(x.dtype)


def normalized_advantage(
    advantage: torch.Tensor, mask: torch.Tensor | None
) -> torch.Tensor:
    """``(a - mean) / (std + 1e-8)`` over the valid entries, with the sample std
    (``ddof=1``) as SB3 and CleanRL; fewer than two entries stay as they are."""
    n = (
        torch.tensor(advantage.numel(), dtype=advantage.dtype, device=advantage.device)
        if mask is None
        else mask.sum().to(advantage.dtype)
    )
    mean = masked_mean(advantage, mask)
    bessel = n / (n - 1).clamp(min=1)
    std = (masked_mean((advantage - mean).pow(2), mask) * bessel).sqrt()
    return torch.where(n > 1, (advantage - mean) / (std + 1e-8), advantage)


def explained_variance(
    prediction: torch.Tensor, target: torch.Tensor, mask: torch.Tensor | None
) -> float:
    """``1 - Var(target - prediction) / Var(target)`` (NaN if the target is constant)."""
    if mask is not None:
        prediction, target = prediction[mask], target[mask]
    if target.numel() < 2:
        return math.nan
    target_var = target.var()
    if target_var <= 0:
        return math.nan
    return float(1.0 - (target - prediction).var() / target_var)


def clipped_surrogate_loss(
    evaluation: PolicyEvaluation,
    minibatch: PolicyBatch,
    clip_range: torch.Tensor,
    value_clip_range: torch.Tensor | None,
    *,
    value_loss_coef: float,
    entropy_coef: float,
    normalize_advantage: bool,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's loss of one minibatch and its detached statistics (:data:`STAT_NAMES`).

    ``evaluation`` is the current policy's on the minibatch; the loss is
    ``policy_loss + value_loss_coef * value_loss - entropy_coef * entropy``.
    """
    mask = minibatch.valid
    advantage, return_ = minibatch.advantage, minibatch.return_
    old_log_prob, old_value = minibatch.old_log_prob, minibatch.old_value
    if mask is not None:
        # Zero stored data at invalid steps: masking the loss alone would
        # still let NaN there reach the gradients (0 * NaN).
        advantage, return_, old_log_prob, old_value = (
            torch.where(mask, x, torch.zeros((), dtype=x.dtype, device=x.device))
            for x in (advantage, return_, old_log_prob, old_value)
        )
    if normalize_advantage:
        advantage = normalized_advantage(advantage, mask)

    log_ratio = evaluation.log_prob - old_log_prob
    ratio = log_ratio.exp()
    surrogate = torch.min(
        ratio * advantage,
        ratio.clamp(1.0 - clip_range, 1.0 + clip_range) * advantage,
    )
    policy_loss = -masked_mean(surrogate, mask)

    value_error = (evaluation.value - return_).pow(2)
    if value_clip_range is not None:
        clipped_value = old_value + (evaluation.value - old_value).clamp(
            -value_clip_range, value_clip_range
        )
        value_error = torch.max(value_error, (clipped_value - return_).pow(2))
    value_loss = 0.5 * masked_mean(value_error, mask)
    loss = policy_loss + value_loss_coef * value_loss
    if entropy_coef:
        entropy = masked_mean(evaluation.entropy, mask)
        loss = loss - entropy_coef * entropy
    with torch.no_grad():
        if not entropy_coef:  # only a statistic: keep it off the graph
            entropy = masked_mean(evaluation.entropy.detach(), mask)
        approx_kl = masked_mean((ratio - 1.0) - log_ratio, mask)
        clipped = ((ratio - 1.0).abs() > clip_range).to(ratio.dtype)
        clip_fraction = masked_mean(clipped, mask)
        stats = torch.stack(
            [
                policy_loss.detach(),
                value_loss.detach(),
                entropy.detach(),
                approx_kl,
                clip_fraction,
            ]
        ).to(torch.float64)  # in the order of STAT_NAMES
    return loss, stats
