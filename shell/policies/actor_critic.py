"""The policy stack (DESIGN.md): observation -> encoder -> features -> actor head and critic head."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from shell.config import PolicyConfig
from shell.errors import ConfigError, space_text
from shell.normalization import ObsNormalizer, ValueNormalizer
from shell.observations import Obs, ObsLayout, map_obs, obs_layout, split_actor_critic
from shell.policies.encoders import ImageEncoder, has_image, make_encoder
from shell.policies.heads import ActionSample, make_actor
from shell.policies.layers import mlp
from shell.policies.recurrent import RecurrentCore


class ActorCritic(nn.Module):
    """An encoder (shared by actor and critic, or one each), an actor head and a critic head.

    ``get_action``, ``evaluate``, ``value`` and the rollout's methods take observations already
    normalised by ``obs_normalizer`` (the runner normalises once and stores the result); ``act``
    takes raw ones and normalises with the frozen statistics, for evaluation and deployment.
    Observations are ``[N, S]`` float32 for flat spaces, ``[N, ...]`` images (uint8 or float),
    or a dict of those (shell/observations.py).

    The encoder is shared when ``policy.share_encoder`` says so, by default when the
    observation has an image (the Atari standard: one CNN, two linear heads); otherwise actor and
    critic have their own (for vectors both encoders are the identity, and the heads' MLPs are
    separate networks, as in the first round). The heads are MLPs of ``policy.hidden_sizes``.

    ``action_space`` and ``observation_space`` are kept as attributes for the env boundary's cast
    (shell.actions.to_env_action) and for :class:`shell.inference.Policy`.

    Raises:
        ConfigError: an observation or action space the policy cannot serve.
    """

    def __init__(self, observation_space: gym.Space | int, action_space: gym.Space, cfg: PolicyConfig,
                 normalize_obs: bool = False, obs_clip: float = 10.0, value_norm: bool = False):
        super().__init__()
        if isinstance(observation_space, int):  # a flat vector of that size
            observation_space = spaces.Box(-np.inf, np.inf, (observation_space,), np.float32)
        layout = obs_layout(observation_space)
        self.layout = layout
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_normalizer = ObsNormalizer(layout, normalize_obs, obs_clip)
        self.recurrent = cfg.recurrent != "none"
        share_rnn = self.recurrent and cfg.share_rnn
        # a centralised critic's input (a Dict of "obs" and "critic") splits between the heads: never shared
        actor_layout, critic_layout = split_actor_critic(layout)
        #: what the actor (and so a deployed policy: export, load_policy) observes: all of the observation, or a
        #: Dict without ``policy.critic_keys``
        self.actor_observation_space = observation_space
        if cfg.critic_keys is not None:
            actor_layout, critic_layout = _critic_keys_split(layout, observation_space, cfg.critic_keys, critic_layout)
            self.actor_observation_space = spaces.Dict({k: observation_space[k] for k in actor_layout.parts})
        self.shared = critic_layout is None and (
            share_rnn or (cfg.share_encoder if cfg.share_encoder is not None else has_image(layout)))
        self.encoder = make_encoder(actor_layout, cfg)
        self.critic_encoder = None if self.shared else make_encoder(critic_layout or layout, cfg)
        features = self.encoder.features_dim
        critic_features = features if self.critic_encoder is None else self.critic_encoder.features_dim
        share_rnn = share_rnn and critic_layout is None
        self.rnn = RecurrentCore(cfg.recurrent, features, cfg.rnn_hidden_size) if self.recurrent else None
        self.critic_rnn = (RecurrentCore(cfg.recurrent, critic_features, cfg.rnn_hidden_size)
                           if self.recurrent and not share_rnn else None)
        if self.recurrent:
            features = critic_features = cfg.rnn_hidden_size
        self.actor = make_actor(features, action_space, cfg)
        self.critic = mlp(critic_features, cfg.hidden_sizes, 1, cfg.activation, out_gain=1.0, layer_norm=cfg.layer_norm)
        #: ``ppo.value_norm``: the critic's head predicts returns normalised by these running statistics
        #: (:class:`shell.normalization.ValueNormalizer`, in the state dict); None without it
        self.value_normalizer = ValueNormalizer() if value_norm else None
        #: where the env's action masks come from ("info", "obs" or "method", see shell/envs/masks.py), or None
        #: for a policy trained without masks. A masked policy acts only with its mask (shell.inference.Policy).
        self.action_mask_source: str | None = None

    def lanes(self) -> dict[None, ActorCritic]:
        """The run's one lane: ``{None: self}`` (see :func:`shell.policies.groups.lanes_policy`)."""
        return {None: self}

    @property
    def mask_size(self) -> int | None:
        """The size of one action mask ``[A]`` (Discrete n, MultiDiscrete sum(nvec), MultiBinary n); None for Box."""
        return getattr(self.actor, "mask_size", None)

    def entropy_weight(self, action_mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` per-state weights of the summed entropy under ``action_mask [B, A]`` (core.entropy_weight):
        the bonus ``ent_coef * w(s) * H(s)`` is ``0.01 * H(s) / sum_k ln n_legal,k(s)``; 1.0 exactly where
        every action is legal."""
        return self.actor.entropy_weight(action_mask)

    @property
    def values_in_step(self) -> bool:
        """Whether a feed-forward rollout should take log pi_old and V(s_t) from each step's own pass
        (:meth:`get_action`) rather than from batched passes afterwards (:meth:`sample_action`, then
        :meth:`log_prob_and_value`).

        True for a shared Nature CNN: the batched passes would run it a second time over the whole
        rollout (4 passes of 256 frames, about 80 ms each in float32 on one CPU thread, per 1,024
        steps). Elsewhere the batched passes are cheaper than per-step heads (doorkey.toml, seed 0,
        2026-11-30: 22.4 s of training with per-step passes against 20.0 s with batched ones).
        """
        return (self.shared and not self.recurrent
                and any(isinstance(m, ImageEncoder) and m.kind == "nature" for m in self.encoder.modules()))

    @property
    def values_in_rollout_step(self) -> bool:
        """Whether :meth:`rollout_step` gives log pi_old and V(s_t) of each step (a recurrent policy, a
        shared Nature CNN); otherwise the rollout computes them afterwards, batched (:meth:`log_prob_and_value`)."""
        return self.recurrent or self.values_in_step

    def rollout_step(self, obs: Obs, state: torch.Tensor | None, episode_start: torch.Tensor,
                     generator: torch.Generator | None = None,
                     action_mask: torch.Tensor | None = None) -> tuple[ActionSample, torch.Tensor | None]:
        """One rollout step on normalised observations ``[N, ...]``: the sample and the state after it.

        A recurrent policy steps from ``state [N, S]`` with the reset rule at ``episode_start [N]``
        bool (:meth:`sample_step`); a feed-forward one ignores both and returns ``state`` (None). The
        sample's ``log_prob`` and ``value`` ``[N]`` are None unless :attr:`values_in_rollout_step`.
        ``action_mask`` ``[N, A]`` bool (None: unmasked) restricts the sample to legal actions.
        """
        if self.recurrent:
            return self.sample_step(obs, state, episode_start, generator, action_mask)
        if self.values_in_step:
            return self.get_action(obs, generator=generator, action_mask=action_mask), state
        action, raw = self.sample_action(obs, generator, action_mask)
        return ActionSample(action, raw, None, None), state

    def rollout_value(self, obs: Obs, state: torch.Tensor | None,
                      episode_start: torch.Tensor | None = None) -> torch.Tensor:
        """``[N]`` values of normalised observations ``[N, ...]``: after ``state`` for a recurrent policy
        (:meth:`value_step`; no restart when ``episode_start`` is None), else :meth:`value`."""
        return self.value_step(obs, state, episode_start) if self.recurrent else self.value(obs)

    def _features(self, obs: Obs) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic features ``[N, F]`` (computed once when the encoder is shared)."""
        actor = self.encoder(obs)
        return actor, actor if self.critic_encoder is None else self.critic_encoder(obs)

    def act(self, raw_obs: Obs, deterministic: bool = True, generator: torch.Generator | None = None,
            action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """The env action for raw observations, normalised with the saved statistics (never updated here).

        Returns ``[N, A]`` float32 inside the Box (fixed components at their value, integers
        rounded), or ``[N]`` / ``[N, K]`` long indices plus the start; shell.actions.to_env_action
        casts it to the space's shape and dtype. ``action_mask [N, A]`` bool: only legal actions.

        Raises:
            ValueError: the policy is recurrent; use :meth:`act_step` with a state.
        """
        if self.recurrent:
            raise ValueError("a recurrent policy acts with act_step(raw_obs, state, episode_start)")
        features = self.encoder(self.obs_normalizer.normalize(raw_obs))
        action, _, _ = self.actor.sample(features, deterministic, generator, with_log_prob=False,
                                         **_mask_kw(action_mask))
        return action

    def probs(self, raw_obs: Obs, action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[N, n]`` action probabilities of a Discrete space for raw observations ``[N, ...]`` (normalised with the
        saved statistics, as :meth:`act`): what :meth:`act` samples from, its argmax what it plays
        deterministically. With ``action_mask [N, n]`` bool they are exactly 0 on illegal actions.

        Raises:
            ValueError: the policy is recurrent (use :meth:`probs_step` with a state); an action space other than
                Discrete (one line naming it).
        """
        if self.recurrent:
            raise ValueError("a recurrent policy's probabilities depend on its state: use probs_step(raw_obs, "
                             "state, episode_start)")
        return self._head_probs(self.encoder(self.obs_normalizer.normalize(raw_obs)), action_mask)

    def _head_probs(self, features: torch.Tensor, action_mask: torch.Tensor | None) -> torch.Tensor:
        """The actor head's ``[N, n]`` probabilities, or ValueError naming a space that has none."""
        head = getattr(self.actor, "probs", None)
        if head is None:
            raise ValueError(f"probs needs a Discrete action space; this policy's is {space_text(self.action_space)}")
        return head(features, **_mask_kw(action_mask))

    def probs_step(self, raw_obs: Obs, state: torch.Tensor | None, episode_start: torch.Tensor | None,
                   action_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`probs` for any policy: ``(probs [N, n], state after this step)``, stepping the state as
        :meth:`act_step` does (feed-forward: ``state`` None, and None after).

        Raises:
            ValueError: see :meth:`probs`.
        """
        if not self.recurrent:
            return self.probs(raw_obs, action_mask), None
        obs = map_obs(lambda x: x.unsqueeze(0), self.obs_normalizer.normalize(raw_obs))
        actor, _, state = self._sequence_features(obs, state, episode_start.unsqueeze(0), critic=False)
        return self._head_probs(actor, action_mask), state

    def action_logits(self, obs: Obs) -> list[torch.Tensor]:
        """Normalised observations ``[B, ...]`` -> the Categorical head's logits, one ``[B, n_k]`` tensor per component
        (one for Discrete, K for MultiDiscrete), with grad: what ``ppo.magnet_coef`` compares with the magnet's.

        Raises:
            ValueError: an action space without a Categorical head (Box, MultiBinary), or a recurrent policy.
        """
        if self.recurrent or not hasattr(self.actor, "nvec"):
            raise ValueError(f"action_logits needs a feed-forward policy of Discrete or MultiDiscrete actions; this "
                             f"one is {'recurrent' if self.recurrent else space_text(self.action_space)}")
        return self.actor._logits(self.encoder(obs))

    def value(self, obs: Obs) -> torch.Tensor:
        """Observations -> ``[N]`` values (in return units)."""
        encoder = self.encoder if self.critic_encoder is None else self.critic_encoder
        return self._value(encoder(obs))

    def _value(self, features: torch.Tensor) -> torch.Tensor:
        """Critic features ``[N, H]`` -> ``[N]`` values in return units (the head's output, rescaled by the
        value normaliser's statistics with ``ppo.value_norm``)."""
        value = self.critic(features).squeeze(-1)
        return value if self.value_normalizer is None else self.value_normalizer.denormalize(value)

    def get_action(self, obs: Obs, deterministic: bool = False,
                   generator: torch.Generator | None = None, action_mask: torch.Tensor | None = None) -> ActionSample:
        """Act on a batch: obs -> action (``[N, A]`` Box, ``[N]`` Discrete, ``[N, K]``
        MultiDiscrete, ``[N, n]`` MultiBinary), raw_action (``[N, F]`` Box, as action otherwise),
        log_prob/value ``[N]``; ``action_mask [N, A]`` bool restricts it to legal actions."""
        actor, critic = self._features(obs)
        action, raw, log_prob = self.actor.sample(actor, deterministic, generator, **_mask_kw(action_mask))
        return ActionSample(action, raw, log_prob, self._value(critic))

    def sample_action(self, obs: Obs, generator: torch.Generator | None = None,
                      action_mask: torch.Tensor | None = None):
        """The rollout's cheap path: ``(action, raw_action)`` only.

        The rollout's log-probs and values are computed afterwards for the whole
        ``[T*N]`` batch in one pass (:meth:`log_prob_and_value`): the parameters do
        not change during a rollout, so this is the same function, batched.
        """
        action, raw, _ = self.actor.sample(self.encoder(obs), False, generator, with_log_prob=False,
                                           **_mask_kw(action_mask))
        return action, raw

    def log_prob_and_value(self, obs: Obs, raw_action: torch.Tensor,
                           action_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        """Observations ``[B, ...]``, stored raw actions (and masks ``[B, A]``) -> ``(log_prob [B], value [B])``."""
        actor, critic = self._features(obs)
        return self.actor.log_prob(actor, raw_action, **_mask_kw(action_mask)), self._value(critic)

    def evaluate(self, obs: Obs, raw_action: torch.Tensor, generator: torch.Generator | None = None,
                 action_mask: torch.Tensor | None = None, rpo_alpha: float = 0.0,
                 draws: tuple[torch.Tensor | None, torch.Tensor] | None = None
                 ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Minibatch observations ``[B, ...]``, stored raw actions -> ``(log_prob [B], entropy [B], value [B])``.

        Raw actions are ``[B, F]`` float (the free Box components), ``[B]`` or ``[B, K]`` long, ``[B, n]``
        long bits; each is scored under its stored ``action_mask [B, A]`` when given. ``rpo_alpha > 0``
        (a Box head only) scores them under RPO's perturbed mean (:meth:`SquashedGaussianActor.evaluate`).
        The value is the critic head's own output: in the normaliser's units with ``ppo.value_norm``.
        ``draws``: a Box head's random draws made beforehand (:meth:`SquashedGaussianActor.draws`).
        """
        actor, critic = self._features(obs)
        log_prob, entropy = self.actor.evaluate(actor, raw_action, generator, **_mask_kw(action_mask),
                                                **_rpo_kw(rpo_alpha), **({} if draws is None else {"draws": draws}))
        return log_prob, entropy, self.critic(critic).squeeze(-1)

    # ------------------------------------------------------------------ recurrent policies
    def initial_state(self, num_envs: int, device: torch.device | None = None) -> torch.Tensor | None:
        """The zero state ``[N, S]`` float32 of ``num_envs`` sub-envs (actor core, then critic core);
        None for a feed-forward policy."""
        if not self.recurrent:
            return None
        size = self.rnn.state_size + (self.critic_rnn.state_size if self.critic_rnn is not None else 0)
        return torch.zeros(num_envs, size, device=device if device is not None else self.critic[-1].weight.device)

    def _sequence_features(self, obs: Obs, state: torch.Tensor, episode_start: torch.Tensor,
                           actor: bool = True, critic: bool = True):
        """Observations ``[L, B, ...]`` -> actor and critic features ``[L*B, H]`` and the state after them.

        The recurrent cores apply the reset rule (shell/policies/recurrent.py); a part not asked
        for is None, and its state passes through unchanged.
        """
        L, B = episode_start.shape
        flat = map_obs(lambda x: x.flatten(0, 1), obs)
        split = self.rnn.state_size
        actor_state, critic_state = state[:, :split], state[:, split:]
        encoded = self.encoder(flat).view(L, B, -1) if actor or self.critic_encoder is None else None
        actor_out = critic_out = None
        if actor or self.critic_rnn is None:
            actor_out, actor_state = self.rnn(encoded, actor_state, episode_start)
        if self.critic_rnn is None:
            critic_out = actor_out
        elif critic:
            critic_in = encoded if self.critic_encoder is None else self.critic_encoder(flat).view(L, B, -1)
            critic_out, critic_state = self.critic_rnn(critic_in, critic_state, episode_start)
        new_state = torch.cat((actor_state, critic_state), dim=-1)
        flatten = lambda x: None if x is None else x.flatten(0, 1)  # noqa: E731
        return flatten(actor_out if actor else None), flatten(critic_out if critic else None), new_state

    def sample_step(self, obs: Obs, state: torch.Tensor, episode_start: torch.Tensor,
                    generator: torch.Generator | None = None,
                    action_mask: torch.Tensor | None = None) -> tuple[ActionSample, torch.Tensor]:
        """One rollout step of a recurrent policy on normalised observations ``[N, ...]``.

        ``state [N, S]`` is the state before the reset rule and ``episode_start [N]`` bool flags
        observations that start an episode. Returns the sample (action, raw action, log_prob and
        value ``[N]``) and the state after this step.
        """
        actor, critic, state = self._sequence_features(map_obs(lambda x: x.unsqueeze(0), obs), state,
                                                       episode_start.unsqueeze(0))
        action, raw, log_prob = self.actor.sample(actor, False, generator, **_mask_kw(action_mask))
        return ActionSample(action, raw, log_prob, self._value(critic)), state

    def value_step(self, obs: Obs, state: torch.Tensor, episode_start: torch.Tensor | None = None) -> torch.Tensor:
        """``[N]`` values of normalised observations ``[N, ...]`` after ``state``; no restart when
        ``episode_start`` is None (the truncation bootstrap continues the ended episode)."""
        if episode_start is None:
            episode_start = torch.zeros(state.shape[0], dtype=torch.bool, device=state.device)
        _, critic, _ = self._sequence_features(map_obs(lambda x: x.unsqueeze(0), obs), state,
                                               episode_start.unsqueeze(0), actor=False)
        return self._value(critic)

    def act_step(self, raw_obs: Obs, state: torch.Tensor | None, episode_start: torch.Tensor | None,
                 deterministic: bool = True, generator: torch.Generator | None = None,
                 action_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor | None]:
        """:meth:`act` for any policy: ``(action, state after this step)``.

        For a feed-forward policy ``state`` is None and stays None. For a recurrent one, ``state``
        is ``[N, S]`` (from :meth:`initial_state`) and ``episode_start [N]`` bool flags the first
        observation of an episode (where the state restarts); only the actor's core runs.
        """
        if not self.recurrent:
            return self.act(raw_obs, deterministic, generator, action_mask), None
        obs = map_obs(lambda x: x.unsqueeze(0), self.obs_normalizer.normalize(raw_obs))
        actor, _, state = self._sequence_features(obs, state, episode_start.unsqueeze(0), critic=False)
        action, _, _ = self.actor.sample(actor, deterministic, generator, with_log_prob=False,
                                         **_mask_kw(action_mask))
        return action, state

    def evaluate_sequences(self, obs: Obs, raw_action: torch.Tensor, state: torch.Tensor,
                           episode_start: torch.Tensor, generator: torch.Generator | None = None,
                           action_mask: torch.Tensor | None = None, rpo_alpha: float = 0.0
                           ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """:meth:`evaluate` for a recurrent policy, replaying sequences from their start states.

        Args:
            obs: normalised observations ``[L, B, ...]`` (time-major sequences).
            raw_action: stored raw actions ``[L, B, ...]``.
            state: ``[B, S]`` the stored state before each sequence's first step.
            episode_start: ``[L, B]`` bool.
            action_mask: ``[L, B, A]`` bool, the stored masks, or None.
            rpo_alpha: RPO's noise on the mean (a Box head; 0 = none), as in :meth:`evaluate`.

        Returns:
            ``(log_prob, entropy, value)``, each ``[L*B]`` in time-major order; the value as in :meth:`evaluate`.
        """
        actor, critic, _ = self._sequence_features(obs, state, episode_start)
        mask = None if action_mask is None else action_mask.flatten(0, 1)
        log_prob, entropy = self.actor.evaluate(actor, raw_action.flatten(0, 1), generator, **_mask_kw(mask),
                                                **_rpo_kw(rpo_alpha))
        return log_prob, entropy, self.critic(critic).squeeze(-1)


def _mask_kw(action_mask: torch.Tensor | None) -> dict[str, torch.Tensor]:
    """The actor heads' ``action_mask`` keyword, left out when there is none (the Box head takes no mask)."""
    return {} if action_mask is None else {"action_mask": action_mask}


def _rpo_kw(rpo_alpha: float) -> dict[str, float]:
    """The Box head's ``rpo_alpha`` keyword, left out when it is 0 (the other heads take none)."""
    return {"rpo_alpha": rpo_alpha} if rpo_alpha else {}


def _critic_keys_split(layout: ObsLayout, space: gym.Space, critic_keys: list[str],
                       split: ObsLayout | None) -> tuple[ObsLayout, ObsLayout]:
    """``(actor layout, critic layout)`` for ``policy.critic_keys``: the actor sees the Dict without them, the
    critic all of it.

    Raises:
        ConfigError: the observation is not a Dict, a key is not one of its keys, no key is left for the
            actor, or a multi-agent critic input already splits it (``policy.critic``).
    """
    keys = f"policy.critic_keys = {critic_keys!r}"
    if split is not None:
        raise ConfigError(f"{keys}: the observation already splits between actor and critic (policy.critic = "
                          "'state' or 'concat'); use one or the other")
    if not layout.is_dict:
        raise ConfigError(f"{keys} needs a Dict observation; this env's is {space}")
    missing = [key for key in critic_keys if key not in layout.parts]
    if missing:
        raise ConfigError(f"{keys}: the observation has no key {missing[0]!r}; its keys are {list(layout.parts)}")
    actor = {key: part for key, part in layout.parts.items() if key not in critic_keys}
    if not actor:
        raise ConfigError(f"{keys} names every key of the observation; leave the actor at least one")
    return ObsLayout(actor), layout
