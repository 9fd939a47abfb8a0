"""Learning-rate schedules: pure functions of progress, or of the measured KL."""

from __future__ import annotations

import torch


def linear_schedule(start: float, end: float, step: int, num_steps: int) -> float:
    """Linear interpolation from ``start`` (at step 0) to ``end`` (at ``num_steps``).

    CleanRL's ``anneal_lr`` is ``linear_schedule(lr, 0.0, update, num_updates)``
    evaluated before each update (``update`` counted from 0).

    Args:
        start: value at step 0.
        end: value at ``num_steps``.
        step: current step, clamped into ``[0, num_steps]``.
        num_steps: positive length of the schedule.

    Returns:
        A Python float.

    Raises:
        ValueError: if ``num_steps`` is not positive.
    """
    if num_steps <= 0:
        raise ValueError(f"num_steps must be positive, got {num_steps}")
    frac = min(max(step, 0), num_steps) / num_steps
    if frac == 1.0:
        return end  # exact at the end; start + (end - start) can round
    return start + (end - start) * frac


def adaptive_learning_rate(
    lr: torch.Tensor,
    kl: torch.Tensor,
    desired_kl: float,
    factor: float = 1.5,
    min_lr: float = 1e-5,
    max_lr: float = 1e-2,
) -> torch.Tensor:
    """One step of rsl_rl's KL-adaptive learning rate, as tensors (no host synchronisation).

    ::

        lr' = max(min_lr, lr / factor)   if kl > 2 * desired_kl
        lr' = min(max_lr, lr * factor)   if 0 < kl < desired_kl / 2
        lr' = lr                         otherwise

    A learning rate outside ``[min_lr, max_lr]`` is moved into it only when the rule
    changes it, as in rsl_rl (``rsl_rl/algorithms/ppo.py``, ``schedule = "adaptive"``);
    a KL that is not finite leaves the learning rate as it is.

    See "Learning to Walk in Minutes Using Massively Parallel Deep Reinforcement Learning",
    Rudin et al., 2021: arXiv:2109.11978 (rsl_rl). The KL-driven step resembles the adaptive KL
    penalty of "Proximal Policy Optimization Algorithms", Schulman et al., 2017: arXiv:1707.06347,
    section 4, applied to the step size instead of a penalty coefficient.

    Args:
        lr: 0-d float tensor, the current learning rate.
        kl: 0-d float tensor, the KL between the rollout's policy and the current one.
        desired_kl: the target KL, > 0.
        factor: the multiplicative step, > 1.
        min_lr: the floor of a decrease, > 0.
        max_lr: the ceiling of an increase, >= min_lr.

    Returns:
        A 0-d tensor of ``lr``'s dtype and device.

    Raises:
        ValueError: for non-float or non-scalar tensors, or arguments out of range.
    """
    for name, value in (("lr", lr), ("kl", kl)):
        if not value.is_floating_point() or value.dim() != 0:
            raise ValueError(f"{name} must be a 0-d floating-point tensor, got {value.dtype} {list(value.shape)}")
    if not desired_kl > 0 or not factor > 1 or not 0 < min_lr <= max_lr:
        raise ValueError(f"adaptive_learning_rate needs desired_kl > 0, factor > 1 and 0 < min_lr <= max_lr; "
                         f"got {desired_kl}, {factor}, {min_lr}, {max_lr}")
    kl = kl.to(lr.dtype)
    down = (lr / factor).clamp(min=min_lr)
    up = (lr * factor).clamp(max=max_lr)
    out = torch.where(kl > 2.0 * desired_kl, down, lr)
    return torch.where((kl < desired_kl / 2.0) & (kl > 0.0), up, out)
