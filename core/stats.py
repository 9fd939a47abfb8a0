"""Statistics: advantage normalisation, PPO diagnostics, running moments."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from core._checks import (
    check_counts,
    check_flag,
    check_floating,
    check_moments,
    check_same_dtype,
    check_same_shape,
    check_unit_interval,
)

if TYPE_CHECKING:  # core imports no NumPy at run time; merge_moments takes its arrays as they come
    import numpy as np

    Moments = torch.Tensor | np.ndarray | np.floating | float


def normalize_advantages(
    advantages: torch.Tensor,
    eps: float = 1e-8,
    rtol: float = 1e-5,
    mean: torch.Tensor | None = None,
    std: torch.Tensor | None = None,
) -> torch.Tensor:
    """Standardise advantages to zero mean and unit (population) std.

    ``(A - mean(A)) / std(A)``, with the population std (``correction=0``).
    A batch whose std is at most ``eps + rtol * |mean(A)|`` counts as having
    zero spread (float rounding makes an all-equal batch's centred values
    tiny but non-zero) and maps to zeros. So a minibatch of one, or of equal
    values, gives zeros: never NaN or inf. Standard practice since OpenAI
    baselines' ppo2; see "What Matters in On-Policy Reinforcement Learning?",
    Andrychowicz et al., 2020: arXiv:2006.05990.

    Args:
        advantages: ``[B]`` float, B >= 1 (any shape; statistics over all elements).
        eps: absolute floor of the std below which spread counts as zero.
        rtol: relative floor, times ``|mean|``.
        mean: 0-d mean to use instead of the batch's own (for example a global
            one over several processes); give both ``mean`` and ``std`` or neither.
        std: 0-d std to use with ``mean``.

    Returns:
        Same shape and dtype.

    Raises:
        ValueError: for a non-float or empty tensor, or only one of mean/std.
    """
    check_floating(advantages=advantages)
    if advantages.numel() == 0:
        raise ValueError("normalize_advantages got an empty tensor")
    if (mean is None) != (std is None):
        raise ValueError("normalize_advantages needs both mean and std, or neither")
    if mean is None:
        mean = advantages.mean()
        centered = advantages - mean
        std = centered.pow(2).mean().sqrt()
    else:
        centered = advantages - mean
    has_spread = std > eps + rtol * mean.abs()
    return torch.where(has_spread, centered / torch.where(has_spread, std, torch.ones_like(std)), 0.0 * centered)


def approx_kl(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor) -> torch.Tensor:
    """The k3 estimator of KL(pi_old || pi_new): ``mean((r - 1) - log r)``.

    ``r = exp(new_log_prob - old_log_prob)``, for actions drawn from pi_old.
    Unbiased and never negative. See John Schulman, "Approximating KL
    Divergence", 2020: http://joschu.net/blog/kl-approx.html.

    Args:
        new_log_prob: ``[B]`` float.
        old_log_prob: ``[B]`` float.

    Returns:
        A 0-d tensor (nats). It is inf only if a log-ratio overflows exp().

    Raises:
        ValueError: on mismatched shapes or non-float inputs.
    """
    check_floating(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    check_same_shape(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    log_ratio = new_log_prob - old_log_prob
    return (torch.expm1(log_ratio) - log_ratio).mean()


def clip_fraction(new_log_prob: torch.Tensor, old_log_prob: torch.Tensor, clip_coef: float) -> torch.Tensor:
    """Fraction of samples whose ratio lies outside ``[1 - clip_coef, 1 + clip_coef]``.

    Args:
        new_log_prob: ``[B]`` float.
        old_log_prob: ``[B]`` float.
        clip_coef: the PPO epsilon, > 0.

    Returns:
        A 0-d tensor in [0, 1], dtype of the inputs.

    Raises:
        ValueError: on mismatched shapes or non-float inputs.
    """
    check_floating(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    check_same_shape(new_log_prob=new_log_prob, old_log_prob=old_log_prob)
    ratio = torch.exp(new_log_prob - old_log_prob)
    return ((ratio - 1.0).abs() > clip_coef).to(new_log_prob.dtype).mean()


def explained_variance(values: torch.Tensor, returns: torch.Tensor, rtol: float = 1e-5) -> torch.Tensor:
    """``1 - Var[R - V] / Var[R]``: how much of the returns' variance the critic explains.

    1 is a perfect critic, 0 no better than a constant, negative worse. When
    the returns have zero variance the ratio is undefined; this returns 0
    then (never NaN). Float rounding leaves a constant batch a tiny positive
    variance, so ``Var[R] <= (rtol * max|R|)^2`` counts as zero. Population
    variances.

    Args:
        values: ``[B]`` float predictions.
        returns: ``[B]`` float targets.
        rtol: relative spread below which the returns count as constant.

    Returns:
        A 0-d tensor.

    Raises:
        ValueError: on mismatched shapes, non-float inputs or an empty batch.
    """
    check_floating(values=values, returns=returns)
    check_same_shape(values=values, returns=returns)
    if returns.numel() == 0:
        raise ValueError("explained_variance got an empty batch")
    var_returns = returns.var(correction=0)
    var_residual = (returns - values).var(correction=0)
    floor = (rtol * returns.abs().max()).square() + torch.finfo(returns.dtype).tiny
    varies = var_returns > floor
    safe = torch.where(varies, var_returns, torch.ones_like(var_returns))
    return torch.where(varies, 1.0 - var_residual / safe, torch.zeros_like(var_returns))


def merge_moments(
    mean: Moments,
    var: Moments,
    count: torch.Tensor | float,
    batch_mean: Moments,
    batch_var: Moments,
    batch_count: torch.Tensor | float,
) -> tuple[Moments, Moments, torch.Tensor | float]:
    """Merge two sets of (mean, population variance, count) statistics.

    The parallel algorithm of Chan, Golub and LeVeque, "Updating Formulae and a
    Pairwise Algorithm for Computing Sample Variances", 1979::

        n     = n_a + n_b
        delta = mean_b - mean_a
        mean  = mean_a + delta * n_b / n
        M2    = var_a * n_a + var_b * n_b + delta^2 * n_a * n_b / n
        var   = M2 / n

    In exact arithmetic it is symmetric in its two operands and associative, and
    merging with a zero count returns the other operand; in floats each holds up
    to rounding, relative to the operands' magnitudes (a mean of 1e20 with count
    0 cancels what it is merged with), so a fixed order gives fixed bits: the
    shell merges ranks in rank order. With Python-number counts a zero total
    raises; with tensor counts (checked without a host synchronisation) it gives
    finite values and count 0.

    The statistics are torch tensors, or host values: NumPy float arrays and
    scalars or Python floats (all four operands of one kind). The arithmetic is
    the same, operation for operation (``delta * delta``, which is what torch's
    ``pow(2)`` computes), and IEEE 754 rounds each ``+ - * /`` alike, so float64
    host values give the bits of float64 tensors of the same values, at a
    fraction of torch's cost per operation on small statistics.

    Args:
        mean: ``[S]`` (any shape) running mean, float.
        var: same shape, running (population) variance.
        count: number of samples behind them (>= 0): a 0-d float tensor (with tensor
            statistics only) or a number.
        batch_mean: same shape, mean of the new batch.
        batch_var: same shape, variance of the new batch.
        batch_count: its number of samples, as ``count``.

    Returns:
        ``(mean, var, count)`` merged: new tensors, or host values.

    Raises:
        ValueError: on mismatched shapes, non-float statistics, tensors mixed with host
            values (a tensor count beside host statistics too), an integer tensor count, a
            negative number count, or a total count of zero given as numbers.
    """
    check_moments(mean=mean, var=var, batch_mean=batch_mean, batch_var=batch_var)
    check_counts(isinstance(mean, torch.Tensor), count=count, batch_count=batch_count)
    check_same_shape(mean=mean, var=var, batch_mean=batch_mean, batch_var=batch_var)
    total = count + batch_count
    if not isinstance(total, torch.Tensor) and total <= 0:
        raise ValueError(f"merge_moments needs a positive total count, got {count} + {batch_count}")
    safe_total = torch.where(total > 0, total, torch.ones_like(total)) if isinstance(total, torch.Tensor) else total
    delta = batch_mean - mean
    new_mean = mean + delta * (batch_count / safe_total)
    m2 = var * count + batch_var * batch_count + delta * delta * (count * batch_count / safe_total)
    return new_mean, m2 / safe_total, total


def batch_moments(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, int]:
    """Mean and population variance over the leading dimension, and the count.

    Args:
        x: ``[B, ...]`` float, B >= 1.

    Returns:
        ``(mean [...], var [...], B)``.

    Raises:
        ValueError: for a non-float input or an empty batch.
    """
    check_floating(x=x)
    if x.dim() == 0 or x.shape[0] == 0:
        raise ValueError(f"batch_moments needs a [B, ...] tensor with B >= 1, got {list(x.shape)}")
    return x.mean(dim=0), x.var(dim=0, correction=0), x.shape[0]


def normalize_obs(
    obs: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, clip: float = 10.0, eps: float = 1e-8
) -> torch.Tensor:
    """``clip((obs - mean) / sqrt(var + eps), -clip, clip)``.

    Args:
        obs: ``[..., S]`` float observations.
        mean: ``[S]`` running mean.
        var: ``[S]`` running population variance.
        clip: positive bound applied after normalisation.
        eps: added to the variance for a never-varying feature.

    Returns:
        ``[..., S]`` normalised observations, dtype of ``obs``.

    Raises:
        ValueError: if mean/var do not match obs's trailing shape.
    """
    check_floating(obs=obs, mean=mean, var=var)
    check_same_shape(mean=mean, var=var)
    if tuple(obs.shape[obs.dim() - mean.dim():]) != tuple(mean.shape):
        raise ValueError(f"obs of shape {list(obs.shape)} does not end in the statistics' shape {list(mean.shape)}")
    return ((obs - mean) / torch.sqrt(var + eps)).clamp(-clip, clip)


def mean_std_from_sums(
    total: torch.Tensor, total_sq: torch.Tensor, count: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Mean and population std from ``sum x``, ``sum x^2`` and ``n`` (for example summed over processes).

    ``mean = total / n``, ``std = sqrt(max(total_sq / n - mean^2, 0))``; the clamp removes the tiny
    negative variances that cancellation can leave.

    Args:
        total: 0-d float tensor, ``sum x``.
        total_sq: 0-d float tensor, ``sum x^2``.
        count: 0-d float tensor, ``n > 0``.

    Returns:
        ``(mean, std)``, 0-d tensors.

    Raises:
        ValueError: for non-float inputs.
    """
    check_floating(total=total, total_sq=total_sq, count=count)
    mean = total / count
    return mean, (total_sq / count - mean.square()).clamp(min=0.0).sqrt()


def discounted_return_step(running: torch.Tensor, reward: torch.Tensor, done: torch.Tensor,
                           gamma: float) -> tuple[torch.Tensor, torch.Tensor]:
    """One step of the per-env discounted return that reward scaling tracks.

    ``R_t = gamma * R_{t-1} + r_t``, restarted at 0 after every episode end
    (Engstrom et al., 2020, "Implementation Matters in Deep Policy Gradients",
    arXiv:2005.12729, algorithm 1).

    Args:
        running: ``[N]`` float, ``R_{t-1}`` (0 where an episode just began).
        reward: ``[N]`` float, ``r_t``, the dtype of ``running``.
        done: ``[N]`` bool or float, 1 where the episode ended with this step.
        gamma: discount in [0, 1].

    Returns:
        ``(R_t [N], next running [N])``: the return whose statistics scale the
        reward, and the same with ended episodes reset to 0.

    Raises:
        ValueError: for shapes or dtypes that differ, non-float inputs or gamma outside [0, 1].
    """
    check_floating(running=running, reward=reward)
    check_flag("done", done)
    check_same_shape(running=running, reward=reward, done=done)
    check_same_dtype(running=running, reward=reward)
    check_unit_interval(gamma=gamma)
    returns = running * gamma + reward
    return returns, torch.where(done.bool(), 0.0, returns)


def scale_rewards(rewards: torch.Tensor, return_var: torch.Tensor, clip: float = 10.0,
                  eps: float = 1e-8) -> torch.Tensor:
    """Reward scaling: ``clip(r / sqrt(Var[R] + eps), -clip, clip)``.

    ``Var[R]`` is the running variance of the discounted return ``R_t = gamma R_{t-1} + r_t``.
    See "Implementation Matters in Deep Policy Gradients", Engstrom et al., 2020:
    arXiv:2005.12729, algorithm 1.

    Args:
        rewards: ``[N]`` float rewards of one step.
        return_var: 0-d variance of the discounted return (any float dtype).
        clip: positive bound after scaling.
        eps: added to the variance.

    Returns:
        ``[N]`` scaled rewards, dtype of ``rewards``.

    Raises:
        ValueError: for non-float inputs.
    """
    check_floating(rewards=rewards, return_var=return_var)
    return (rewards / torch.sqrt(return_var + eps).to(rewards.dtype)).clamp(-clip, clip)


def normalize_value(values: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    """Values or returns in the critic's normalised units: ``(x - mean) / sqrt(var + eps)``.

    Value normalisation trains the critic on targets standardised with running statistics of
    the returns and reads its outputs back through :func:`denormalize_value` (MAPPO's
    ``ValueNorm``; PopArt without its output-preserving weight update). The statistics are cast
    to ``values``' dtype first.

    See "The Surprising Effectiveness of PPO in Cooperative Multi-Agent Games", Yu et al., 2022:
    arXiv:2103.01955, section 4 (value normalisation); "Learning values across many orders of
    magnitude", van Hasselt et al., 2016: arXiv:1602.07714 (PopArt).

    Args:
        values: ``[...]`` float, in return units.
        mean: 0-d float, the running mean of the returns.
        var: 0-d float, their running population variance (>= 0).
        eps: added to the variance, > 0.

    Returns:
        Same shape and dtype as ``values``.

    Raises:
        ValueError: for non-float inputs, statistics that are not 0-d, or ``eps <= 0``.
    """
    _check_value_stats(values, mean, var, eps)
    return (values - mean.to(values.dtype)) / torch.sqrt(var.to(values.dtype) + eps)


def denormalize_value(normalized: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                      eps: float = 1e-5) -> torch.Tensor:
    """The inverse of :func:`normalize_value`: ``x * sqrt(var + eps) + mean``, in return units.

    Args:
        normalized: ``[...]`` float, the critic's output.
        mean: 0-d float, the running mean of the returns.
        var: 0-d float, their running population variance (>= 0).
        eps: added to the variance, > 0.

    Returns:
        Same shape and dtype as ``normalized``.

    Raises:
        ValueError: for non-float inputs, statistics that are not 0-d, or ``eps <= 0``.
    """
    _check_value_stats(normalized, mean, var, eps)
    return normalized * torch.sqrt(var.to(normalized.dtype) + eps) + mean.to(normalized.dtype)


def _check_value_stats(values: torch.Tensor, mean: torch.Tensor, var: torch.Tensor, eps: float) -> None:
    check_floating(values=values, mean=mean, var=var)
    if mean.dim() != 0 or var.dim() != 0:
        raise ValueError(f"mean and var must be 0-d, got {list(mean.shape)} and {list(var.shape)}")
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps}")
