"""PPO losses: the clipped surrogate and the (optionally clipped) value loss.

Losses know nothing about distributions: they take log-probabilities and
values as tensors. All are returned as scalars to minimise.
"""

from __future__ import annotations

import torch

from core._checks import check_floating, check_same_shape

MAX_LOG_RATIO = 20.0
"""Log-ratios above this are treated as this value in :func:`clip_loss` (``e^20`` is about 4.9e8)."""


def _stable_ratio(log_ratio: torch.Tensor) -> torch.Tensor:
    # exp() overflows float32 at a log-ratio of about 88.7. Above MAX_LOG_RATIO the value is
    # exp(MAX_LOG_RATIO) exactly and the gradient that value times d(log_ratio) (a straight-through
    # cap), so the loss stays finite and the gradient keeps its sign instead of vanishing.
    capped = log_ratio.clamp(max=MAX_LOG_RATIO).detach()
    return torch.exp(capped + (log_ratio - log_ratio.detach()))


def clip_loss(
    new_log_prob: torch.Tensor,
    old_log_prob: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
) -> torch.Tensor:
    """PPO's clipped surrogate objective, negated into a loss.

    With ``r = exp(new_log_prob - old_log_prob)``::

        loss = -mean( min( r * A, clip(r, 1 - clip_coef, 1 + clip_coef) * A ) )

    As in the paper's min(), a sample passes no gradient where its clipped
    term is the smaller one (``r > 1 + clip_coef`` with ``A > 0``, or
    ``r < 1 - clip_coef`` with ``A < 0``) and passes the unclipped gradient
    ``A * r * d log_prob`` everywhere else. Log-ratios above
    :data:`MAX_LOG_RATIO` (20) are capped at it, in value and in gradient, so
    the loss is finite even when the log-ratio is huge.

    See "Proximal Policy Optimization Algorithms", Schulman et al., 2017:
    arXiv:1707.06347, eq. (7).

    Args:
        new_log_prob: ``[B]`` float, log pi(a|s) under the current policy (with grad).
        old_log_prob: ``[B]`` float, log pi_old(a|s) stored at rollout time.
        advantages: ``[B]`` float (usually normalised).
        clip_coef: epsilon of the paper, > 0.

    Returns:
        A 0-d tensor, the loss to minimise.

    Raises:
        ValueError: on mismatched shapes, non-float inputs, an empty batch or
            a clip_coef <= 0.
    """
    check_floating(new_log_prob=new_log_prob, old_log_prob=old_log_prob, advantages=advantages)
    check_same_shape(new_log_prob=new_log_prob, old_log_prob=old_log_prob, advantages=advantages)
    if advantages.numel() == 0:
        raise ValueError("clip_loss got an empty batch")
    if not clip_coef > 0:
        raise ValueError(f"clip_coef must be > 0, got {clip_coef}")
    ratio = _stable_ratio(new_log_prob - old_log_prob)
    clipped_ratio = ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef)
    # Where the clipped term is the smaller one it is a constant in the parameters.
    clipped_is_min = ((advantages > 0) & (ratio > 1.0 + clip_coef)) | (
        (advantages < 0) & (ratio < 1.0 - clip_coef)
    )
    surrogate = torch.where(clipped_is_min, clipped_ratio.detach() * advantages, ratio * advantages)
    return -surrogate.mean()


def value_loss(
    new_values: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip_coef: float | None = None,
) -> torch.Tensor:
    """Half mean squared error of the critic, optionally clipped.

    Unclipped: ``0.5 * mean((V - R)^2)``. With ``clip_coef`` and the
    rollout-time values ``V_old`` (not values recomputed by the current
    network)::

        V_clip = V_old + clip(V - V_old, -clip_coef, clip_coef)
        loss   = 0.5 * mean( max((V - R)^2, (V_clip - R)^2) )

    as in OpenAI baselines' ppo2 (see "Implementation Matters in Deep Policy
    Gradients", Engstrom et al., 2020: arXiv:2005.12729, section 3).

    Args:
        new_values: ``[B]`` float, V(s) from the current critic (with grad).
        returns: ``[B]`` float targets, ``advantages + values`` of the rollout.
        old_values: ``[B]`` float rollout-time values; required with ``clip_coef``.
        clip_coef: positive clip range for the value change, or None for no clipping.

    Returns:
        A 0-d tensor, the loss to minimise.

    Raises:
        ValueError: on mismatched shapes, an empty batch, a clip_coef <= 0, or
            a clip_coef without old_values.
    """
    check_floating(new_values=new_values, returns=returns)
    check_same_shape(new_values=new_values, returns=returns)
    if returns.numel() == 0:
        raise ValueError("value_loss got an empty batch")
    squared = (new_values - returns).pow(2)
    if clip_coef is None:
        return 0.5 * squared.mean()
    if not clip_coef > 0:
        raise ValueError(f"clip_coef must be > 0, got {clip_coef}")
    if old_values is None:
        raise ValueError("value_loss with clip_coef needs old_values (the rollout-time values)")
    check_same_shape(new_values=new_values, old_values=old_values)
    clipped = old_values + (new_values - old_values).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.maximum(squared, (clipped - returns).pow(2)).mean()
