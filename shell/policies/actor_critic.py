"""The policy stack (DESIGN.md): observation -> encoder -> features -> actor head and critic head."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn

from shell.config import PolicyConfig
from shell.normalization import ObsNormalizer
from shell.observations import Obs, obs_layout
from shell.policies.encoders import has_image, make_encoder
from shell.policies.heads import ActionSample, make_actor
from shell.policies.layers import mlp


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
    (shell.actions.to_env_action) and for :class:`shell.evaluation.Policy`.

    Raises:
        ConfigError: an observation or action space the policy cannot serve.
    """

    def __init__(self, observation_space: gym.Space | int, action_space: gym.Space, cfg: PolicyConfig,
                 normalize_obs: bool = False, obs_clip: float = 10.0):
        super().__init__()
        if isinstance(observation_space, int):  # a flat vector of that size
            observation_space = spaces.Box(-np.inf, np.inf, (observation_space,), np.float32)
        layout = obs_layout(observation_space)
        self.layout = layout
        self.observation_space = observation_space
        self.action_space = action_space
        self.obs_normalizer = ObsNormalizer(layout, normalize_obs, obs_clip)
        self.shared = cfg.share_encoder if cfg.share_encoder is not None else has_image(layout)
        self.encoder = make_encoder(layout, cfg)
        self.critic_encoder = None if self.shared else make_encoder(layout, cfg)
        features = self.encoder.features_dim
        self.actor = make_actor(features, action_space, cfg)
        self.critic = mlp(features, cfg.hidden_sizes, 1, cfg.activation, out_gain=1.0)

    def _features(self, obs: Obs) -> tuple[torch.Tensor, torch.Tensor]:
        """Actor and critic features ``[N, F]`` (computed once when the encoder is shared)."""
        actor = self.encoder(obs)
        return actor, actor if self.critic_encoder is None else self.critic_encoder(obs)

    def act(self, raw_obs: Obs, deterministic: bool = True, generator: torch.Generator | None = None) -> torch.Tensor:
        """The env action for raw observations, normalised with the saved statistics (never updated here).

        Returns ``[N, A]`` float32 inside the Box (fixed components at their value, integers
        rounded), or ``[N]`` / ``[N, K]`` long indices plus the start; shell.actions.to_env_action
        casts it to the space's shape and dtype.
        """
        features = self.encoder(self.obs_normalizer.normalize(raw_obs))
        action, _, _ = self.actor.sample(features, deterministic, generator, with_log_prob=False)
        return action

    def value(self, obs: Obs) -> torch.Tensor:
        """Observations -> ``[N]`` values."""
        encoder = self.encoder if self.critic_encoder is None else self.critic_encoder
        return self.critic(encoder(obs)).squeeze(-1)

    def get_action(self, obs: Obs, deterministic: bool = False,
                   generator: torch.Generator | None = None) -> ActionSample:
        """Act on a batch: obs -> action (``[N, A]`` Box, ``[N]`` Discrete, ``[N, K]``
        MultiDiscrete), raw_action (``[N, F]`` Box, as action otherwise), log_prob/value ``[N]``."""
        actor, critic = self._features(obs)
        action, raw, log_prob = self.actor.sample(actor, deterministic, generator)
        return ActionSample(action, raw, log_prob, self.critic(critic).squeeze(-1))

    def sample_action(self, obs: Obs, generator: torch.Generator | None = None):
        """The rollout's cheap path: ``(action, raw_action)`` only.

        The rollout's log-probs and values are computed afterwards for the whole
        ``[T*N]`` batch in one pass (:meth:`log_prob_and_value`): the parameters do
        not change during a rollout, so this is the same function, batched.
        """
        action, raw, _ = self.actor.sample(self.encoder(obs), False, generator, with_log_prob=False)
        return action, raw

    def log_prob_and_value(self, obs: Obs, raw_action: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Observations ``[B, ...]``, stored raw actions -> ``(log_prob [B], value [B])``."""
        actor, critic = self._features(obs)
        return self.actor.log_prob(actor, raw_action), self.critic(critic).squeeze(-1)

    def evaluate(self, obs: Obs, raw_action: torch.Tensor,
                 generator: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Minibatch observations ``[B, ...]``, stored raw actions -> ``(log_prob [B], entropy [B], value [B])``.

        Raw actions are ``[B, F]`` float (the free Box components), ``[B]`` or ``[B, K]`` long.
        """
        actor, critic = self._features(obs)
        log_prob, entropy = self.actor.evaluate(actor, raw_action, generator)
        return log_prob, entropy, self.critic(critic).squeeze(-1)
