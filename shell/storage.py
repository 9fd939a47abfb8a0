"""Preallocated rollout storage on the device, time-major ``[T, N, ...]``."""

from __future__ import annotations

from collections.abc import Iterator
from typing import NamedTuple

import torch

import core
from shell.observations import Obs, ObsLayout, map_obs


class Transition(NamedTuple):
    """What one rollout step of N rows produces (PureJaxRL's ``Transition``), written by
    :meth:`RolloutStorage.add`.

    Attributes:
        obs: the observation as the policy saw it (normalised), ``[N, ...]`` or a dict of parts.
        raw_action: the action as the policy sampled it: ``[N, F]`` float pre-tanh, ``[N]`` or ``[N, K]`` long.
        reward: ``[N]`` float32, scaled, with any truncation bootstrap folded in.
        done: ``[N]`` bool, the episode ended at this step (terminated or truncated).
        valid: ``[N]`` bool, the row is a real transition: False at a NEXT_STEP source's dummy step
            (DESIGN.md, "Rows and the validity mask"). Always present; all true for other sources.
        log_prob: ``[N]`` log pi_old of the raw action, or None when the rollout fills it afterwards,
            batched (:meth:`RolloutStorage.set_log_probs_and_values`).
        value: ``[N]`` V(s_t), or None likewise.
        state: ``[N, S]`` a recurrent policy's state before the step (before the reset rule); None
            for a feed-forward policy.
        episode_start: ``[N]`` bool, the observation starts an episode (recurrent policies).
        action_mask: ``[N, A]`` bool, the legal actions of ``obs`` (the action was drawn under it);
            None for an env without masks.
    """

    obs: Obs
    raw_action: torch.Tensor
    reward: torch.Tensor
    done: torch.Tensor
    valid: torch.Tensor
    log_prob: torch.Tensor | None = None
    value: torch.Tensor | None = None
    state: torch.Tensor | None = None
    episode_start: torch.Tensor | None = None
    action_mask: torch.Tensor | None = None


class RolloutStorage:
    """One rollout of T steps from N envs, and the flattened minibatches built from it.

    Stores each step's :class:`Transition`: ``obs`` as the policy saw it, the raw (pre-tanh)
    action, its ``log_probs``, ``values``, ``rewards`` (with any truncation bootstrap already
    folded in), ``dones`` and ``valid``. Rows that are not valid never enter a minibatch or a
    loss; for a source without them, selecting the valid rows changes no bit of any result.

    With ``turns`` (a turn-based game's lane, where a row acts only at its seat's turns) the advantages
    are :func:`core.turn_gae`'s: a row's transition lasts until its next valid step, and the rewards and
    dones of the steps in between are its own. A last transition whose next turn lies beyond the rollout
    has no target yet and leaves ``valid``.
    """

    def __init__(self, num_steps: int, num_envs: int, layout: ObsLayout | int, action_shape: tuple[int, ...],
                 action_dtype: torch.dtype, device: torch.device, state_size: int = 0, turns: bool = False):
        T, N = num_steps, num_envs
        self.num_steps, self.num_envs, self.turns = T, N, turns
        if isinstance(layout, int):  # a flat observation of that size
            self.obs: Obs = torch.zeros((T, N, layout), device=device)
        else:  # each part in its own dtype: uint8 images stay uint8, [T, N, C, H, W] or [T, N, H, W, C]
            parts = {key: torch.zeros((T, N, *p.shape), dtype=p.dtype, device=device)
                     for key, p in layout.parts.items()}
            self.obs = parts[None] if None in parts else parts
        self.raw_actions = torch.zeros((T, N, *action_shape), dtype=action_dtype, device=device)
        self.log_probs = torch.zeros((T, N), device=device)
        self.values = torch.zeros((T, N), device=device)
        self.rewards = torch.zeros((T, N), device=device)
        self.dones = torch.zeros((T, N), dtype=torch.bool, device=device)
        self.advantages = torch.zeros((T, N), device=device)
        self.returns = torch.zeros((T, N), device=device)
        # recurrent policies: the state before each step (before the reset rule) and the episode-start flags
        self.states = torch.zeros((T, N, state_size), device=device) if state_size else None
        self.episode_starts = torch.zeros((T, N), dtype=torch.bool, device=device) if state_size else None
        # False at rows that are no real transition (kept out of the minibatches and the losses)
        self.valid = torch.ones((T, N), dtype=torch.bool, device=device)
        # [T, N, A] bool action masks, allocated by the first transition that has one (None: no masks)
        self.action_masks: torch.Tensor | None = None
        self.step = 0

    def add(self, transition: Transition) -> None:
        """Write ``transition`` at step ``self.step``; raises RuntimeError when the storage is full.

        A rollout whose policy gives no per-step ``log_prob`` and ``value`` fills them for the whole
        rollout afterwards (:meth:`set_log_probs_and_values`); a recurrent policy's ``state`` and
        ``episode_start`` are kept when the storage was made with a ``state_size``.
        """
        t = self.step
        if t >= self.num_steps:
            raise RuntimeError(f"RolloutStorage overflow: all {self.num_steps} steps are written; call reset()")
        obs = transition.obs
        if isinstance(obs, dict):
            for key, value in obs.items():
                self.obs[key][t] = value
        else:
            self.obs[t] = obs
        self.raw_actions[t] = transition.raw_action
        self.rewards[t] = transition.reward
        self.dones[t] = transition.done
        self.valid[t] = transition.valid
        if transition.log_prob is not None:
            self.log_probs[t], self.values[t] = transition.log_prob, transition.value
        if self.states is not None:
            self.states[t] = transition.state
            self.episode_starts[t] = transition.episode_start
        if transition.action_mask is not None:
            if self.action_masks is None:
                self.action_masks = torch.ones((self.num_steps, self.num_envs, transition.action_mask.shape[-1]),
                                               dtype=torch.bool, device=self.values.device)
            self.action_masks[t] = transition.action_mask
        self.step = t + 1

    def reset(self) -> None:
        self.step = 0

    def set_log_probs_and_values(self, log_probs: torch.Tensor, values: torch.Tensor) -> None:
        """Store the rollout's ``[T*N]`` log-probs and values (computed in one batched pass)."""
        self.log_probs.copy_(log_probs.view_as(self.log_probs))
        self.values.copy_(values.view_as(self.values))

    def compute_advantages(self, last_value: torch.Tensor, gamma: float, gae_lambda: float,
                           last_valid: torch.Tensor | None = None) -> None:
        """Fill ``advantages`` with core.gae (core.turn_gae with ``turns``) and ``returns = advantages + values``.

        Args:
            last_value: ``[N]`` V of the observation after the last step.
            gamma: the discount.
            gae_lambda: GAE's lambda.
            last_valid: ``[N]`` bool, the rows that act on that observation (with ``turns``; None = all).

        Raises:
            RuntimeError: the rollout is not full.
        """
        if self.step != self.num_steps:
            raise RuntimeError(f"compute_advantages on a partial rollout ({self.step}/{self.num_steps} steps)")
        if self.turns:
            if last_valid is None:
                last_valid = torch.ones_like(self.valid[0])
            advantages, complete = core.turn_gae(self.rewards, self.values, self.dones, self.valid, last_value,
                                                 last_valid, gamma, gae_lambda)
            self.advantages.copy_(advantages)
            self.valid &= complete  # a move whose outcome the rollout has not seen yet enters no update
        else:
            self.advantages.copy_(core.gae(self.rewards, self.values, self.dones, last_value, gamma, gae_lambda))
        torch.add(self.advantages, self.values, out=self.returns)

    def valid_values_and_returns(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Flattened ``values`` and ``returns`` of the valid rows, for explained variance."""
        mask = self.valid.flatten()
        return self.values.flatten()[mask], self.returns.flatten()[mask]

    def minibatches(self, num_minibatches: int, generator: torch.Generator | None = None) -> Iterator[dict]:
        """Shuffle the flattened ``[T*N]`` batch with ``torch.randperm`` on the device and yield minibatches.

        The valid rows are selected from the permutation (not masked in the sums afterwards, which
        would change the last bits of a source whose rows are all valid). Each minibatch is a dict
        of ``mb_`` tensors: ``obs [B, ...]`` (a dict for Dict observations), ``raw_actions [B, ...]``,
        ``log_probs``, ``values``, ``advantages``, ``returns`` (all ``[B]``), and ``action_masks [B, A]``
        when the rollout has masks.
        """
        b = {
            "obs": map_obs(lambda x: x.flatten(0, 1), self.obs),
            "raw_actions": self.raw_actions.flatten(0, 1),
            "log_probs": self.log_probs.flatten(),
            "values": self.values.flatten(),
            "advantages": self.advantages.flatten(),
            "returns": self.returns.flatten(),
        }
        if self.action_masks is not None:
            b["action_masks"] = self.action_masks.flatten(0, 1)
        perm = torch.randperm(self.num_steps * self.num_envs, device=self.values.device, generator=generator)
        perm = perm[self.valid.flatten()[perm]]  # rows that are not valid never enter a minibatch
        batch_size = len(perm)
        size = batch_size // num_minibatches
        if size == 0:  # fewer valid rows than minibatches (a group of agents absent most of the rollout): one each
            size, num_minibatches = 1, batch_size
        for start in range(0, size * num_minibatches, size):
            mb_inds = perm[start:start + size]
            yield {k: map_obs(lambda x, i=mb_inds: x[i], v) for k, v in b.items()}

    def sequence_minibatches(self, num_minibatches: int, seq_len: int,
                             generator: torch.Generator | None = None) -> Iterator[dict]:
        """Minibatches of whole sequences for a recurrent policy.

        The ``[T, N]`` rollout is cut into ``N * T / seq_len`` sequences of ``seq_len`` steps
        (``seq_len = T``: whole env columns), shuffled with ``torch.randperm`` on the device and
        split into ``num_minibatches`` equal groups of B sequences. Each minibatch holds ``obs``
        and ``raw_actions`` ``[L, B, ...]``, ``episode_starts [L, B]``, ``states [B, S]`` (the stored
        state before each sequence's first step), and ``log_probs``, ``values``, ``advantages``,
        ``returns`` and ``valid`` ``[L*B]`` in the time-major order of :meth:`ActorCritic.evaluate_sequences`
        (rows that are not valid stay in a sequence, for the state, but out of the losses), and
        ``action_masks [L, B, A]`` when the rollout has masks.
        """
        T, N, L = self.num_steps, self.num_envs, seq_len
        K = T // L

        def to_sequences(x: torch.Tensor) -> torch.Tensor:  # [T, N, ...] -> [L, K*N, ...]
            return x.reshape(K, L, N, *x.shape[2:]).transpose(0, 1).reshape(L, K * N, *x.shape[2:])

        b = {
            "obs": map_obs(to_sequences, self.obs),
            "raw_actions": to_sequences(self.raw_actions),
            "episode_starts": to_sequences(self.episode_starts),
            "log_probs": to_sequences(self.log_probs),
            "values": to_sequences(self.values),
            "advantages": to_sequences(self.advantages),
            "returns": to_sequences(self.returns),
            "valid": to_sequences(self.valid),
        }
        if self.action_masks is not None:
            b["action_masks"] = to_sequences(self.action_masks)
        states = self.states.reshape(K, L, N, -1)[:, 0].reshape(K * N, -1)
        perm = torch.randperm(K * N, device=self.values.device, generator=generator)
        for mb_inds in perm.chunk(num_minibatches):
            mb = {k: map_obs(lambda x, i=mb_inds: x[:, i], v) for k, v in b.items()}
            for key in ("log_probs", "values", "advantages", "returns", "valid"):
                mb[key] = mb[key].flatten()
            mb["states"] = states[mb_inds]
            yield mb
