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
    _check_gae_inputs(rewards, values, dones, last_value, gamma, lam)

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


def _check_gae_inputs(rewards: torch.Tensor, values: torch.Tensor, dones: torch.Tensor, last_value: torch.Tensor,
                      gamma: float, lam: float) -> None:
    """The checks :func:`gae` and :func:`turn_gae` share (ValueError naming the shapes or dtypes)."""
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


def turn_gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    dones: torch.Tensor,
    valid: torch.Tensor,
    last_value: torch.Tensor,
    last_valid: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Generalised advantage estimates over each row's own turns (turn-based games), one reverse scan.

    A row (one seat of a game) acts only at its ``valid`` steps; its transition taken at a valid step t
    lasts until its next valid step t' (its next turn), or until the rollout's end when
    ``last_valid`` says that it acts on the observation after the last step. Steps where the row does
    not act are transparent: they cost no discount, and what they bring belongs to the transition
    before them. With ``u`` running over the steps strictly between t and t' ::

        R_t = rewards[t] + sum_u rewards[u]         D_t = dones[t] or any_u dones[u]
        delta_t = R_t + gamma * (1 - D_t) * V_{t'} - values[t]
        A_t     = delta_t + gamma * lam * (1 - D_t) * A_{t'}

    where ``V_{t'}`` is ``values[t']`` (``last_value`` past the end) and ``A_{t'}`` is 0 past the end,
    and the sum stops at the first done (at t itself or at a step u): what comes after it before
    the row's next turn (in the next episode, before the seat first moves there) belongs to no
    transition and is dropped. So a seat's reward is what it collected since its own last move, and a
    game that ends while a seat waits (the loser of a board game, whose ``-1`` and done arrive at the
    winner's step) ends that seat's last transition.

    A transition whose next turn lies beyond the rollout (``last_valid`` false and no done before
    the end) has no target yet: it is not ``complete``, gets advantage 0 and must stay out of the
    update; the transition before it bootstraps from its value, as any PPO rollout does at its end.
    Every other valid step is complete. Steps that are not valid get advantage 0.

    With every step valid and ``last_valid`` all true this is :func:`gae`.

    Args:
        rewards: ``[T, N]`` or ``[T]`` float, the reward the row received at step t (whether or not it acted).
        values: same shape and dtype, ``V(s_t)`` (read only at valid steps).
        dones: same shape, bool or float in {0, 1}: the row's episode ended at step t.
        valid: same shape, bool or float in {0, 1}: the row acted at step t.
        last_value: ``[N]`` (0-d for ``[T]`` inputs), ``V(s_T)`` of the observation after the last step.
        last_valid: same shape as ``last_value``, bool or float: the row acts on that observation.
        gamma: discount in [0, 1], per turn of the row.
        lam: GAE lambda in [0, 1].

    Returns:
        ``(advantages, complete)``: advantages like ``values``; complete ``[T, N]`` (or ``[T]``) bool,
        the valid steps whose transition has its target.

    Raises:
        ValueError: as :func:`gae`, and for ``valid`` or ``last_valid`` of another shape or a dtype other
            than bool/float.
    """
    _check_gae_inputs(rewards, values, dones, last_value, gamma, lam)
    check_flag("valid", valid)
    check_flag("last_valid", last_valid)
    check_same_shape(values=values, valid=valid)
    check_same_shape(last_value=last_value, last_valid=last_valid)

    acts, ends = valid.bool(), dones.bool()
    zero = torch.zeros_like(last_value)
    no = torch.zeros_like(last_value, dtype=torch.bool)
    next_adv, next_value = zero, last_value
    pending_reward, pending_done = zero, no  # from the steps after t up to the row's next turn
    beyond = ~last_valid.bool()  # the row's next turn lies beyond the rollout
    advantages, complete = [], []
    for t in range(values.shape[0] - 1, -1, -1):
        act, end = acts[t], ends[t]
        done = end | pending_done
        not_done = 1.0 - done.to(values.dtype)
        # what came after a done at t itself belongs to the next episode
        reward = rewards[t] + torch.where(end, zero, pending_reward)
        delta = reward + gamma * not_done * next_value - values[t]
        adv = delta + (gamma * lam) * not_done * next_adv
        has_target = act & ~(beyond & ~done)
        adv = torch.where(has_target, adv, zero)
        advantages.append(adv)
        complete.append(has_target)
        next_adv = torch.where(act, adv, next_adv)
        next_value = torch.where(act, values[t], next_value)
        pending_reward = torch.where(act, zero, torch.where(end, rewards[t], pending_reward + rewards[t]))
        pending_done = torch.where(act, no, pending_done | end)
        beyond = beyond & ~act
    advantages.reverse()
    complete.reverse()
    return torch.stack(advantages, dim=0), torch.stack(complete, dim=0)


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
