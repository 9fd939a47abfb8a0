"""Advantage estimation and time-limit bootstrapping.

Time-major convention: ``[T, N]`` with T rollout steps and N parallel envs
(or ``[T]`` for one env). ``dones[t] = 1`` means the episode ended with the
transition taken at step t (terminated or truncated); this is PureJaxRL's and
rsl_rl's convention, not CleanRL's "first step of a new episode" flag.
"""

from __future__ import annotations

import torch

from core._checks import (
    check_flag,
    check_floating,
    check_same_dtype,
    check_same_shape,
    check_unit_interval,
)


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    last_value: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Generalised advantage estimates, one reverse scan over time.

    With ``m_t = 1 - dones[t]`` and ``V_T = last_value``::

        delta_t = rewards[t] + gamma * m_t * V_{t+1} - values[t]
        A_t     = delta_t + gamma * lam * m_t * A_{t+1},    A_T = 0

    ``dones[t] = 1`` means the episode ended with the transition taken at step
    t, so neither ``V_{t+1}`` nor ``A_{t+1}`` (which belong to the next
    episode) reach step t. For a time-limit truncation fold the bootstrap
    value into ``rewards`` first with :func:`bootstrap_truncated`.

    The loop runs over T only; the env dimension is vectorised.

    See "High-Dimensional Continuous Control Using Generalized Advantage
    Estimation", Schulman et al., 2015: arXiv:1506.02438, eq. (16).

    Args:
        rewards: ``[T, N]`` or ``[T]`` float, reward of the transition at step t.
        values: same shape and dtype, ``V(s_t)`` from the rollout.
        dones: same shape, bool or float in {0, 1}: the episode ended at step t.
        last_value: ``[N]`` (a 0-d scalar for ``[T]`` inputs), ``V(s_T)`` of the
            observation after the last step, same dtype.
        gamma: discount in [0, 1].
        lam: GAE lambda in [0, 1]; 0 gives the one-step TD error, 1 the
            Monte-Carlo return minus the value.

    Returns:
        advantages: same shape, dtype and device as ``values``.

    Raises:
        ValueError: on mismatched shapes or dtypes, a non-float reward/value,
            a dones dtype other than bool/float, an empty time axis, or
            gamma/lam outside [0, 1].
    """
    check_floating(rewards=rewards, values=values, last_value=last_value)
    check_same_dtype(rewards=rewards, values=values, last_value=last_value)
    check_flag("dones", dones)
    check_same_shape(rewards=rewards, values=values, dones=dones)
    if values.dim() not in (1, 2) or values.shape[0] == 0:
        raise ValueError(f"rewards/values/dones must be [T, N] or [T] with T >= 1, got {list(values.shape)}")
    if tuple(last_value.shape) != tuple(values.shape[1:]):
        raise ValueError(
            f"last_value must have shape {list(values.shape[1:])} for values of shape "
            f"{list(values.shape)}, got {list(last_value.shape)}"
        )
    check_unit_interval(gamma=gamma, lam=lam)

    not_done = 1.0 - dones.to(values.dtype)
    next_values = torch.cat((values[1:], last_value.unsqueeze(0)), dim=0)
    deltas = rewards + gamma * not_done * next_values - values
    decay = (gamma * lam) * not_done

    advantages = []
    carry = torch.zeros_like(last_value)
    for t in range(values.shape[0] - 1, -1, -1):
        carry = deltas[t] + decay[t] * carry
        advantages.append(carry)
    advantages.reverse()
    return torch.stack(advantages, dim=0)


def bootstrap_truncated(
    rewards: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    final_values: torch.Tensor,
    gamma: float,
) -> torch.Tensor:
    """Fold time-limit bootstrapping into the rewards.

    Returns ``rewards + gamma * final_values`` where an episode was truncated
    and not terminated, and ``rewards`` elsewhere. Termination wins when both
    flags are set. Entries of ``final_values`` where no truncation happened are
    never read (they may hold anything, NaN included).

    After this fold, pass ``dones = terminated | truncated`` to :func:`gae`:
    the target at a truncation then is ``r + gamma * V(final_obs)``, the value
    of the true last observation, not of the reset observation and not
    ``V(s_t)``. See "Time Limits in Reinforcement Learning", Pardo et al.,
    2018: arXiv:1712.00378, section 3.

    Args:
        rewards: ``[...]`` float rewards (typically ``[N]`` for one step or ``[T, N]``).
        terminated: same shape, bool or float flag.
        truncated: same shape, bool or float flag.
        final_values: same shape and dtype as ``rewards``, ``V(final_obs)``.
        gamma: discount in [0, 1].

    Returns:
        New rewards tensor, same shape, dtype and device as ``rewards``.

    Raises:
        ValueError: on mismatched shapes or dtypes, bad flag dtypes, or gamma
            outside [0, 1].
    """
    check_floating(rewards=rewards, final_values=final_values)
    check_same_dtype(rewards=rewards, final_values=final_values)
    check_flag("terminated", terminated)
    check_flag("truncated", truncated)
    check_same_shape(rewards=rewards, terminated=terminated, truncated=truncated, final_values=final_values)
    check_unit_interval(gamma=gamma)
    bootstrap = truncated.bool() & ~terminated.bool()
    return torch.where(bootstrap, rewards + gamma * final_values, rewards)
