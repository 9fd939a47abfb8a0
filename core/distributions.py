"""Pure functions for the tanh-squashed Gaussian and for categorical policies.

The continuous policy samples ``u ~ Normal(mean, std)`` (the raw, pre-tanh
action) and acts with ``a = tanh(u) * action_scale + action_bias``. Storing
``u`` rather than ``a`` means log-probabilities never need ``atanh``.
"""

from __future__ import annotations

import math
import operator

import torch
from torch.distributions import Normal
from torch.nn.functional import softplus

from core._checks import broadcast_to_last, check_floating, check_same_dtype, check_same_shape

_LOG2 = math.log(2.0)


def _as_int(name: str, value: object) -> int:
    """An integer (Python or numpy, not bool) as int; ValueError otherwise."""
    if isinstance(value, bool):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise ValueError(f"{name} must be an integer, got {value!r}") from None


def _as_tensor(value: torch.Tensor | float, like: torch.Tensor) -> torch.Tensor:
    return torch.as_tensor(value, dtype=like.dtype, device=like.device)


def squash(
    raw_action: torch.Tensor,
    action_scale: torch.Tensor | float,
    action_bias: torch.Tensor | float,
    low: torch.Tensor | float | None = None,
    high: torch.Tensor | float | None = None,
) -> torch.Tensor:
    """Map a raw Gaussian action into a Box: ``a = clamp(tanh(u) * scale + bias, low, high)``.

    In exact arithmetic ``tanh(u) * scale + bias`` lies in ``[bias - scale,
    bias + scale] = [low, high]``. In floating point it does not: once tanh
    saturates to exactly +-1, the rounding of ``scale`` and ``bias`` (and of the
    product and the sum) can land a step outside the Box's own bounds. With float32
    and Box(-1, 0.2), ``u = 10`` gives 0.20000002 > float32(0.2); with Box(-1000, 0.2)
    it gives 0.2000122. Pass ``low`` and ``high`` (bounds representable in
    ``raw_action``'s dtype, rounded inward) to clamp the result into the Box; the
    clamp only moves a result by that rounding, so the density of ``u`` that
    :func:`squashed_log_prob` gives stays the policy's.

    Args:
        raw_action: ``[..., A]`` float, the pre-tanh action ``u``.
        action_scale: ``[A]`` tensor or float, ``(high - low) / 2`` of the Box.
        action_bias: ``[A]`` tensor or float, ``(high + low) / 2`` of the Box.
        low: ``[A]`` tensor or float, or None (no lower clamp): the Box's lower bound.
        high: ``[A]`` tensor or float, or None (no upper clamp): the Box's upper bound.

    Returns:
        ``[..., A]`` action, dtype of ``raw_action``; inside ``[low, high]`` when both
        are given, otherwise within rounding of ``[bias - scale, bias + scale]``.

    Raises:
        ValueError: if scale, bias, low or high does not broadcast to ``raw_action``'s shape.
    """
    check_floating(raw_action=raw_action)
    scale = _as_tensor(action_scale, raw_action)
    bias = _as_tensor(action_bias, raw_action)
    broadcast_to_last("action_scale", scale, raw_action)
    broadcast_to_last("action_bias", bias, raw_action)
    action = torch.tanh(raw_action) * scale + bias
    if low is None and high is None:
        return action
    lo = None if low is None else _as_tensor(low, raw_action)
    hi = None if high is None else _as_tensor(high, raw_action)
    for name, bound in (("low", lo), ("high", hi)):
        if bound is not None:
            broadcast_to_last(name, bound, raw_action)
    return torch.clamp(action, lo, hi)


def unsquash(
    action: torch.Tensor,
    action_scale: torch.Tensor | float,
    action_bias: torch.Tensor | float,
) -> torch.Tensor:
    """Invert :func:`squash`: ``u = atanh((a - bias) / scale)``, always finite.

    The normalised action ``(a - bias) / scale`` is clamped into the open
    interval ``(-1 + eps, 1 - eps)`` with ``eps = torch.finfo(dtype).eps``
    before ``atanh``, so actions at or beyond the bounds map to a large finite
    raw action (about +-8.3 in float32, +-18.37 in float64), never to inf.

    Args:
        action: ``[..., A]`` float action in the env's units.
        action_scale: ``[A]`` tensor or float, positive.
        action_bias: ``[A]`` tensor or float.

    Returns:
        ``[..., A]`` raw action, same dtype.

    Raises:
        ValueError: if scale or bias does not broadcast to ``action``'s shape.
    """
    check_floating(action=action)
    scale = _as_tensor(action_scale, action)
    bias = _as_tensor(action_bias, action)
    broadcast_to_last("action_scale", scale, action)
    broadcast_to_last("action_bias", bias, action)
    eps = torch.finfo(action.dtype).eps
    y = ((action - bias) / scale).clamp(-1.0 + eps, 1.0 - eps)
    return torch.atanh(y)


def tanh_log_abs_det_jacobian(
    raw_action: torch.Tensor, action_scale: torch.Tensor | float
) -> torch.Tensor:
    """``log |d a / d u|`` of ``a = tanh(u) * scale + bias``, per dimension.

    Uses the stable identity ``log(1 - tanh(u)^2) = 2 * (log 2 - u - softplus(-2u))``,
    finite for every finite ``u`` (the naive form is ``log(0) = -inf`` once
    float tanh saturates, at ``|u|`` above about 9 in float32).

    Args:
        raw_action: ``[..., A]`` float.
        action_scale: ``[A]`` tensor or float, positive.

    Returns:
        ``[..., A]`` log-Jacobian per dimension (not summed).

    Raises:
        ValueError: if the scale does not broadcast to ``raw_action``'s shape.
    """
    check_floating(raw_action=raw_action)
    scale = _as_tensor(action_scale, raw_action)
    broadcast_to_last("action_scale", scale, raw_action)
    return torch.log(scale) + 2.0 * (_LOG2 - raw_action - softplus(-2.0 * raw_action))


def squashed_log_prob(
    raw_action: torch.Tensor,
    mean: torch.Tensor,
    std: torch.Tensor,
    action_scale: torch.Tensor | float,
) -> torch.Tensor:
    """Log-density of ``a = tanh(u) * scale + bias`` with ``u ~ Normal(mean, std)``.

    By the change of variables (the bias does not enter)::

        log p(a) = sum_i [ log N(u_i; mean_i, std_i) - log|d a_i / d u_i| ]
        log|d a_i / d u_i| = log(scale_i) + 2 * (log 2 - u_i - softplus(-2 u_i))

    Values and gradients are finite for every finite ``u``, including
    ``|u| = 30`` where float32 ``tanh`` is exactly 1. See "Soft Actor-Critic",
    Haarnoja et al., 2018: arXiv:1801.01290, appendix C, eq. (21).

    Entropy: the squashed distribution has no closed-form entropy. Its entropy
    is ``H[a] = H[u] + E_u[ sum_i log|d a_i / d u_i| ]`` (Gaussian entropy
    plus the expected log-Jacobian). :func:`squashed_entropy` gives the
    one-sample reparameterised estimate of that expression, which is what the
    shell logs and what the entropy bonus uses.

    Args:
        raw_action: ``[..., A]`` float, the pre-tanh action ``u``.
        mean: broadcastable to ``[..., A]`` (torch rules), Gaussian mean.
        std: broadcastable to ``[..., A]``, positive Gaussian std.
        action_scale: ``[A]`` tensor or float, positive Box half-width.

    Returns:
        log_prob: ``[...]`` (summed over the last dimension), dtype of ``raw_action``.

    Raises:
        ValueError: if mean, std or action_scale do not broadcast to
            ``raw_action``'s shape, their dtypes differ, or ``raw_action`` has no
            action dimension.
    """
    check_floating(raw_action=raw_action, mean=mean, std=std)
    check_same_dtype(raw_action=raw_action, mean=mean, std=std)
    if raw_action.dim() == 0:
        raise ValueError("raw_action must have a trailing action dimension [..., A], got a scalar")
    broadcast_to_last("mean", mean, raw_action)
    broadcast_to_last("std", std, raw_action)
    gaussian = Normal(mean, std, validate_args=False).log_prob(raw_action)
    return (gaussian - tanh_log_abs_det_jacobian(raw_action, action_scale)).sum(dim=-1)


def squashed_entropy(
    mean: torch.Tensor,
    std: torch.Tensor,
    noise: torch.Tensor,
    action_scale: torch.Tensor | float,
) -> torch.Tensor:
    """One-sample reparameterised estimate of the squashed Gaussian's entropy.

    ``H[a] = H[u] + E[sum_i log|d a_i / d u_i|]`` with ``u = mean + std * noise``;
    the Gaussian part is exact (``0.5 * log(2 pi e std^2)`` per dimension), the
    Jacobian term is evaluated at the one sample. The estimate is unbiased for
    ``noise ~ Normal(0, 1)`` and differentiable in ``mean`` and ``std``, so an
    entropy bonus built on it cannot be gamed by pushing ``u`` into tanh's flat
    tails. The caller draws ``noise`` (``torch.randn_like``), which keeps this
    function pure.

    Args:
        mean: ``[..., A]`` float.
        std: broadcastable to ``[..., A]``, positive.
        noise: ``[..., A]`` standard-normal draws.
        action_scale: ``[A]`` tensor or float, positive.

    Returns:
        ``[...]`` entropy estimate in nats, summed over the last dimension.

    Raises:
        ValueError: if the shapes do not broadcast to ``noise``'s shape.
    """
    check_floating(mean=mean, std=std, noise=noise)
    broadcast_to_last("mean", mean, noise)
    broadcast_to_last("std", std, noise)
    raw_action = mean + std * noise
    gaussian = Normal(mean, std, validate_args=False).entropy().expand_as(noise)
    return (gaussian + tanh_log_abs_det_jacobian(raw_action, action_scale)).sum(dim=-1)


def categorical_sample(logits: torch.Tensor, noise: torch.Tensor) -> torch.Tensor:
    """Draw one index per row of ``logits`` with the Gumbel-max trick.

    ``argmax_i(logits_i - log(noise_i))``: with ``noise`` i.i.d. Exponential(1),
    ``-log(noise)`` is standard Gumbel, and the argmax of logits plus Gumbel noise
    is distributed as ``softmax(logits)`` (Gumbel 1954; Maddison, Tarlow and
    Minka, "A* Sampling", NeurIPS 2014, section 2). The caller draws ``noise``
    (``torch.empty_like(logits).exponential_(generator=g)``), which keeps this
    function pure. On a CPU this is about 6x cheaper per call than
    ``Categorical(logits).sample()`` for a rollout step of 16 envs.

    Args:
        logits: ``[..., n]`` float, unnormalised log-probabilities; ``-inf`` marks
            an impossible action (never drawn while a finite logit remains).
        noise: ``[..., n]`` float, positive, Exponential(1) draws.

    Returns:
        ``[...]`` long indices in ``[0, n)``.

    Raises:
        ValueError: if the shapes differ, a tensor is not floating point or
            ``logits`` has no last dimension.
    """
    check_floating(logits=logits, noise=noise)
    check_same_shape(logits=logits, noise=noise)
    if logits.dim() == 0 or logits.shape[-1] == 0:
        raise ValueError(f"logits must have a non-empty last (action) dimension, got shape {list(logits.shape)}")
    return (logits - noise.log()).argmax(dim=-1)


def normalized_entropy_coef(num_actions: int, base_coef: float = 0.01) -> float:
    """Entropy coefficient scaled by the maximum entropy of a Categorical.

    ``base_coef / ln(num_actions)``: a uniform policy over ``n`` actions has
    entropy ``ln(n)``, so this makes the bonus of a maximally uncertain policy
    equal to ``base_coef`` whatever the number of actions.

    Args:
        num_actions: number of discrete actions n, an int >= 2.
        base_coef: coefficient for a normalised entropy in [0, 1].

    Returns:
        The coefficient, a Python float.

    Raises:
        ValueError: if ``num_actions`` is not an int >= 2.
    """
    n = _as_int("num_actions", num_actions)
    if n < 2:
        raise ValueError(f"num_actions must be an int >= 2, got {num_actions!r}")
    return float(base_coef) / math.log(n)


def multi_discrete_entropy_coef(nvec: list[int] | tuple[int, ...], base_coef: float = 0.01) -> float:
    """Entropy coefficient for a MultiDiscrete space: ``base_coef / sum_i ln(n_i)``.

    The joint entropy of independent Categoricals is the sum of their
    entropies, at most ``sum_i ln(n_i)``; components with ``n_i = 1`` carry no
    entropy and add nothing.

    Args:
        nvec: number of choices per component, ints >= 1 with at least one >= 2.
        base_coef: coefficient for a normalised entropy in [0, 1].

    Returns:
        The coefficient, a Python float.

    Raises:
        ValueError: if every component has fewer than 2 choices or one is < 1.
    """
    sizes = [_as_int("nvec", n) for n in nvec]
    if any(n < 1 for n in sizes) or not any(n >= 2 for n in sizes):
        raise ValueError(f"nvec must hold ints >= 1 with at least one >= 2, got {list(nvec)}")
    return float(base_coef) / sum(math.log(n) for n in sizes)


def rpo_mean(mean: torch.Tensor, uniform: torch.Tensor, alpha: float) -> torch.Tensor:
    """The Gaussian's mean perturbed by uniform noise, as Robust Policy Optimization scores actions.

    ``mean + z`` with ``z = alpha * (2 * uniform - 1)``, so ``z ~ U(-alpha, alpha)`` for
    ``uniform ~ U(0, 1)``: RPO adds fresh noise of this kind to the mean of the policy's
    Gaussian in every update pass (never when acting), which keeps the entropy from
    collapsing. For the tanh-squashed Gaussian the noise goes on the pre-squash mean: the
    stored raw action ``u`` is pre-tanh and the log-Jacobian of the squash does not depend on
    the mean, so ``squashed_log_prob(u, rpo_mean(mean, uniform, alpha), std, scale)`` is the
    squashed density of ``u`` under the perturbed Gaussian. ``alpha = 0`` gives ``mean``
    itself (the same tensor).

    See "Robust Policy Optimization in Deep Reinforcement Learning", Rahman and Xue, 2022:
    arXiv:2212.07536 (CleanRL's ``ppo_continuous_action_rpo.py``, ``rpo_alpha = 0.5``).

    Args:
        mean: ``[..., A]`` float, the Gaussian's mean (with grad).
        uniform: same shape and dtype, draws from ``U(0, 1)`` (``torch.rand``).
        alpha: the noise's half-width, >= 0.

    Returns:
        ``[..., A]`` the perturbed mean (gradients flow to ``mean`` unchanged).

    Raises:
        ValueError: on mismatched shapes or dtypes, non-float inputs, or ``alpha < 0``.
    """
    check_floating(mean=mean, uniform=uniform)
    check_same_shape(mean=mean, uniform=uniform)
    check_same_dtype(mean=mean, uniform=uniform)
    if not alpha >= 0:
        raise ValueError(f"alpha must be >= 0, got {alpha}")
    if alpha == 0:
        return mean
    return mean + alpha * (2.0 * uniform - 1.0)
