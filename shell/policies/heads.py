"""Actor heads: distribution parameters from features ``[B, F]``; the log-prob and entropy maths is core's."""

from __future__ import annotations

from typing import NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from torch import nn
from torch.distributions import Categorical

import core
from shell.actions import COMPOSITES, box_action_layout
from shell.config import PolicyConfig
from shell.errors import ConfigError, space_text
from shell.policies.layers import mlp

LOG_STD_MIN, LOG_STD_MAX = -20.0, 2.0
MIN_STD = 1e-6

class ActionSample(NamedTuple):
    """A batched action choice.

    Attributes:
        action: what the env receives, before the env boundary's cast to the space's dtype
            and shape (shell.actions.to_env_action): ``[N, A]`` float32 inside the Box bounds
            (``A = prod(shape)``, fixed components at their value, integers rounded), or long
            indices plus the space's start (``[N]`` Discrete, ``[N, K]`` MultiDiscrete).
        raw_action: what storage keeps (dtype ``actor.raw_action_dtype``): the ``[N, F]``
            float pre-tanh Gaussian sample of the F free Box components, or the 0-based long
            indices.
        log_prob: ``[N]`` log-density of the raw action under the policy (None where a rollout
            computes it afterwards, batched: :meth:`ActorCritic.rollout_step`).
        value: ``[N]`` critic value of the observation (None likewise).
    """

    action: torch.Tensor
    raw_action: torch.Tensor
    log_prob: torch.Tensor | None
    value: torch.Tensor | None


class SquashedGaussianActor(nn.Module):
    """Tanh-squashed Gaussian policy for a Box action space with finite bounds, on encoder features ``[N, H]``.

    ``u ~ Normal(mean(s), std)`` over the F free components, and
    ``a = clamp(tanh(u) * action_scale + action_bias, action_low, action_high)``.
    The std is a state-independent log-std parameter (``std = "parameter"``),
    clamped to [-20, 2], or a state-dependent softplus head (``std = "state"``)
    floored at 1e-6: either way it can never underflow to 0.

    How a Box is served (shell.actions.box_action_layout):

    - Bounds. The clamp to the float32 bounds rounded inward keeps every action inside the
      space's own bounds: float32 rounding of ``tanh(u) * scale + bias`` alone can step
      outside (Box(-1, 0.2) gives 0.20000002). It moves an action by that rounding only, so
      storage keeps ``u`` and the log-prob stays the squashed-Gaussian density of ``u``.
    - Fixed components (``low == high``, a locked joint) are held at their value and left out
      of the distribution: a locked joint is a legitimate space and refusing it would force
      users to write a wrapper, while its zero scale would give an infinite log-Jacobian and
      NaN at the first update. The Gaussian, the stored raw action, the log-prob and the
      entropy cover the free components only; a space with no free component is refused.
    - Integer dtypes. The action is squashed onto ``[low - 0.5, high + 0.5]``, rounded and
      clipped to ``[low, high]``. The env action is a deterministic function of ``u``, so the
      log-prob of ``u`` is still the right likelihood for the policy gradient (rounding is part
      of the environment as the policy sees it); the stored raw action stays float.
    - Shapes. A Box of shape ``shape`` is served flattened, ``A = prod(shape)``; the env
      boundary restores the shape and casts to the space's dtype.

    Raises:
        ConfigError: at construction, for a Box it cannot serve (see box_action_layout).
    """

    def __init__(self, in_size: int, action_space: spaces.Box, cfg: PolicyConfig):
        super().__init__()
        layout = box_action_layout(action_space)
        self.action_size = layout.num_free  # F: the Gaussian's dimension
        self.env_action_size = layout.size  # A: the flat env action
        self.integer = layout.integer
        self.state_std = cfg.std == "state"
        out = 2 * self.action_size if self.state_std else self.action_size
        self.net = mlp(in_size, cfg.hidden_sizes, out, cfg.activation, out_gain=0.01,
                       layer_norm=cfg.layer_norm)
        if self.state_std:
            # softplus(b) = exp(init_log_std) at the start
            init = float(np.log(np.expm1(np.exp(cfg.init_log_std))))
            nn.init.constant_(self.net[-1].bias[self.action_size:], init)
        else:
            self.log_std = nn.Parameter(torch.full((self.action_size,), float(cfg.init_log_std)))
        for name in ("scale", "bias", "low", "high"):
            self.register_buffer(f"action_{name}", torch.as_tensor(getattr(layout, name)), persistent=False)
        self.all_free = layout.num_free == layout.size
        self.register_buffer("free_index", torch.as_tensor(layout.free_index), persistent=False)
        self.register_buffer("fixed_action", torch.as_tensor(layout.fixed_action), persistent=False)

    @property
    def raw_action_dtype(self) -> torch.dtype:
        """The dtype storage keeps raw actions in: the network's float dtype (float32), whatever the space's."""
        return self.net[-1].weight.dtype

    @property
    def raw_action_shape(self) -> tuple[int, ...]:
        """The shape of one stored raw action: ``(F,)``, the free components only."""
        return (self.action_size,)

    def distribution(self, features: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``[N, H]`` features -> ``(mean [N, F], std [N, F] or [F])`` over the free components."""
        out = self.net(features)
        if self.state_std:
            mean, pre_std = out.split(self.action_size, dim=-1)
            return mean, nn.functional.softplus(pre_std) + MIN_STD
        return out, self.log_std.clamp(LOG_STD_MIN, LOG_STD_MAX).exp()

    def env_action(self, raw_action: torch.Tensor) -> torch.Tensor:
        """Raw actions ``[..., F]`` -> env actions ``[..., A]`` inside the Box, in ``raw_action``'s dtype.

        Free components are squashed and clamped to the inward-rounded float32 bounds (rounded
        first for an integer dtype); fixed ones take their value.
        """
        if self.integer:
            action = core.squash(raw_action, self.action_scale, self.action_bias).round()
            action = torch.clamp(action, self.action_low, self.action_high)
        else:
            action = core.squash(raw_action, self.action_scale, self.action_bias, self.action_low, self.action_high)
        if self.all_free:
            return action
        full = self.fixed_action.to(action.dtype).expand(*action.shape[:-1], self.env_action_size).clone()
        full[..., self.free_index] = action
        return full

    def sample(self, features: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
               with_log_prob: bool = True):
        """Return ``(action [N, A], raw_action [N, F], log_prob [N] or None)``; deterministic uses u = mean."""
        mean, std = self.distribution(features)
        if deterministic:
            raw = mean
        else:
            raw = mean + std * torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype)
        log_prob = core.squashed_log_prob(raw, mean, std, self.action_scale) if with_log_prob else None
        return self.env_action(raw), raw, log_prob

    def log_prob(self, features: torch.Tensor, raw_action: torch.Tensor) -> torch.Tensor:
        """``[B]`` log-density of stored raw actions ``[B, F]`` under the current policy."""
        mean, std = self.distribution(features)
        return core.squashed_log_prob(raw_action, mean, std, self.action_scale)

    def draws(self, batch: int, generator: torch.Generator | None = None, rpo_alpha: float = 0.0,
              device: torch.device | None = None) -> tuple[torch.Tensor | None, torch.Tensor]:
        """The random draws :meth:`evaluate` makes for ``batch`` rows, in its order and from the same stream:
        RPO's uniform ``[B, F]`` (None at ``rpo_alpha = 0``), then the entropy's standard normal ``[B, F]``, in
        the network's dtype. Handed back as ``evaluate(..., draws=...)`` they give its result bit for bit; a
        compiled update draws them outside its graph (``run.compile``: dynamo cannot trace a generator)."""
        shape, dtype = (batch, self.action_size), self.raw_action_dtype
        device = device if device is not None else self.net[-1].weight.device
        uniform = torch.rand(shape, generator=generator, device=device, dtype=dtype) if rpo_alpha else None
        return uniform, torch.randn(shape, generator=generator, device=device, dtype=dtype)

    def evaluate(self, features: torch.Tensor, raw_action: torch.Tensor, generator: torch.Generator | None = None,
                 rpo_alpha: float = 0.0, draws: tuple[torch.Tensor | None, torch.Tensor] | None = None):
        """Return ``(log_prob [B], entropy [B])`` of stored raw actions ``[B, F]`` under the current policy.

        The entropy is core.squashed_entropy's one-sample reparameterised estimate, over the
        free components (a fixed component has no distribution).

        With ``rpo_alpha > 0`` (``ppo.rpo_alpha``) the mean is first perturbed by fresh noise
        ``U(-alpha, alpha)`` per component (core.rpo_mean, drawn from ``generator`` before the
        entropy's noise), and both the log-prob and the entropy are the perturbed Gaussian's. The
        noise goes on the pre-squash mean, where the stored raw action lives. At 0 nothing is drawn.
        ``draws`` (:meth:`draws`, made beforehand) replace both draws from ``generator``.

        Raises:
            ValueError: if ``raw_action`` is not floating point or does not match ``[B, F]``.
        """
        mean, std = self.distribution(features)
        if rpo_alpha:
            uniform = torch.rand(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype) \
                if draws is None else draws[0]
            mean = core.rpo_mean(mean, uniform, rpo_alpha)
        log_prob = core.squashed_log_prob(raw_action, mean, std, self.action_scale)
        noise = torch.randn(mean.shape, generator=generator, device=mean.device, dtype=mean.dtype) \
            if draws is None else draws[1]
        return log_prob, core.squashed_entropy(mean, std.expand_as(mean), noise, self.action_scale)


class CategoricalActor(nn.Module):
    """Categorical policy over logits for Discrete(n, start) and MultiDiscrete(nvec, start), on features ``[N, H]``.

    One ``torch.distributions.Categorical`` per component, batched over envs
    (logits ``[N, n_k]``, so envs never mix); log-probs and entropies are
    summed over components, the entropy exactly, from the current logits.
    Storage keeps the 0-based index (``raw_action``): ``[N]`` long for
    Discrete, ``[N, K]`` for MultiDiscrete; the space's ``start`` is added only
    to the action sent to the env.

    Action masks (``action_mask``, optional everywhere): ``[N, n]`` bool for Discrete, the K component
    masks concatenated ``[N, sum(nvec)]`` for MultiDiscrete (the logits' layout), True where legal.
    A masked action has probability exactly 0 and is never sampled nor chosen by the argmax
    (core/masks.py); without a mask (None) the maths is the unmasked one, and an all-true mask gives
    the same bits.
    """

    def __init__(self, in_size: int, action_space: spaces.Discrete | spaces.MultiDiscrete, cfg: PolicyConfig):
        super().__init__()
        self.multi = isinstance(action_space, spaces.MultiDiscrete)
        if self.multi:
            self.nvec = [int(n) for n in action_space.nvec]
            start = torch.as_tensor(action_space.start, dtype=torch.long)
        else:
            self.nvec = [int(action_space.n)]
            start = torch.tensor(int(action_space.start), dtype=torch.long)
        self.net = mlp(in_size, cfg.hidden_sizes, sum(self.nvec), cfg.activation, out_gain=0.01,
                       layer_norm=cfg.layer_norm)
        self.register_buffer("action_start", start, persistent=False)

    @property
    def raw_action_dtype(self) -> torch.dtype:
        """The dtype storage keeps raw actions in: long indices."""
        return torch.long

    @property
    def raw_action_shape(self) -> tuple[int, ...]:
        """The shape of one stored raw action: ``()`` for Discrete, ``(K,)`` for MultiDiscrete."""
        return (len(self.nvec),) if self.multi else ()

    @property
    def mask_size(self) -> int:
        """The size of one action mask: ``n`` for Discrete, ``sum(nvec)`` for MultiDiscrete."""
        return sum(self.nvec)

    def _logits(self, features: torch.Tensor) -> list[torch.Tensor]:
        """``[N, H]`` features -> one ``[N, n_k]`` logits tensor per component."""
        logits = self.net(features)
        return logits.split(self.nvec, dim=-1) if self.multi else [logits]

    def _masks(self, action_mask: torch.Tensor, batch: int) -> list[torch.Tensor]:
        check_mask_shape(action_mask, batch, self.mask_size)
        return list(action_mask.split(self.nvec, dim=-1)) if self.multi else [action_mask]

    def distributions(self, features: torch.Tensor, action_mask: torch.Tensor | None = None) -> list[Categorical]:
        """``[N, H]`` features -> one Categorical of batch shape ``[N]`` per component (masked when given)."""
        parts = self._logits(features)
        if action_mask is None:
            return [Categorical(logits=part, validate_args=False) for part in parts]
        masks = self._masks(action_mask, features.shape[0])
        return [core.masked_categorical(part, m) for part, m in zip(parts, masks, strict=True)]

    def probs(self, features: torch.Tensor, action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[N, H]`` features -> ``[N, n]`` action probabilities of a Discrete space (a softmax of the logits;
        with ``action_mask [N, n]`` bool, core.masked_probs: exactly 0 on illegal actions).

        Raises:
            ValueError: a MultiDiscrete space (its joint distribution is a product, not one ``[N, n]`` table); a
                mask that is not ``[N, n]`` bool.
        """
        if self.multi:
            raise ValueError(f"probs needs a Discrete action space; this policy's is MultiDiscrete({self.nvec})")
        logits = self._logits(features)[0]
        if action_mask is None:
            return torch.softmax(logits, dim=-1)
        return core.masked_probs(logits, self._masks(action_mask, features.shape[0])[0])

    def _index_columns(self, raw_action: torch.Tensor, batch: int) -> list[torch.Tensor]:
        expected = (batch, len(self.nvec)) if self.multi else (batch,)
        if tuple(raw_action.shape) != expected:
            raise ValueError(
                f"raw_action of shape {list(raw_action.shape)} does not match the action shape {list(expected)}; "
                "a [B, 1] against [B] would broadcast to [B, B]"
            )
        return list(raw_action.unbind(-1)) if self.multi else [raw_action]

    def sample(self, features: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
               with_log_prob: bool = True, action_mask: torch.Tensor | None = None):
        """Return ``(action, raw_action, log_prob [N] or None)``; deterministic takes the (legal) argmax.

        Sampling uses core.categorical_sample (Gumbel-max), about 6x cheaper per rollout
        step than ``Categorical.sample``; the distribution is the same. With ``action_mask``
        only legal actions are drawn (core.masked_categorical_sample, the same noise).
        """
        parts = self._logits(features)
        masks = None if action_mask is None else self._masks(action_mask, features.shape[0])
        if masks is None:
            if deterministic:
                columns = [part.argmax(dim=-1) for part in parts]
            else:
                columns = [core.categorical_sample(part, torch.empty_like(part).exponential_(generator=generator))
                           for part in parts]
        elif deterministic:
            columns = [core.masked_argmax(part, m) for part, m in zip(parts, masks, strict=True)]
        else:
            columns = [core.masked_categorical_sample(part, m, torch.empty_like(part).exponential_(generator=generator))
                       for part, m in zip(parts, masks, strict=True)]
        log_prob = None
        if with_log_prob:
            if masks is None:
                dists = [Categorical(logits=part, validate_args=False) for part in parts]
            else:
                dists = [core.masked_categorical(part, m) for part, m in zip(parts, masks, strict=True)]
            log_prob = sum(d.log_prob(c) for d, c in zip(dists, columns, strict=True))
        raw = torch.stack(columns, dim=-1) if self.multi else columns[0]
        return raw + self.action_start, raw, log_prob

    def log_prob(self, features: torch.Tensor, raw_action: torch.Tensor,
                 action_mask: torch.Tensor | None = None) -> torch.Tensor:
        """``[B]`` log-probability of stored indices under the current logits (and the stored mask)."""
        dists = self.distributions(features, action_mask)
        columns = self._index_columns(raw_action, features.shape[0])
        return sum(d.log_prob(c) for d, c in zip(dists, columns, strict=True))

    def evaluate(self, features: torch.Tensor, raw_action: torch.Tensor, generator: torch.Generator | None = None,
                 action_mask: torch.Tensor | None = None):
        """Return ``(log_prob [B], entropy [B])`` of stored indices under the current logits.

        With ``action_mask`` each action is scored under its stored mask and the entropy is the
        masked one (core.masked_log_prob_and_entropy: masked terms exactly 0).

        Raises:
            ValueError: if ``raw_action`` is not ``[B]`` (Discrete) or ``[B, K]`` (MultiDiscrete), or the
                mask is not ``[B, mask_size]`` bool.
        """
        columns = self._index_columns(raw_action, features.shape[0])
        if action_mask is None:
            dists = self.distributions(features)
            log_prob = sum(d.log_prob(c) for d, c in zip(dists, columns, strict=True))
            return log_prob, sum(d.entropy() for d in dists)
        parts = self._logits(features)
        masks = self._masks(action_mask, features.shape[0])
        pairs = [core.masked_log_prob_and_entropy(part, m, c) for part, m, c in zip(parts, masks, columns, strict=True)]
        return sum(p[0] for p in pairs), sum(p[1] for p in pairs)

    def entropy_weight(self, action_mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` per-state weights of the summed entropy (core.entropy_weight; 1.0 where all is legal)."""
        return core.entropy_weight(action_mask, self.nvec)


class BernoulliActor(nn.Module):
    """Independent Bernoulli bits over logits for MultiBinary(shape), on features ``[N, H]``.

    ``n = prod(shape)`` logits, one per bit (log-odds of the bit being 1); the log-prob and the entropy
    are summed over bits (core.bernoulli_log_prob, core.bernoulli_entropy). Storage keeps the bits as
    ``[N, n]`` long; the env boundary reshapes them to the space's shape and casts to int8.

    Action masks (optional): ``[N, n]`` bool, True where the bit may be set; a bit that may not be set
    is 0 with probability exactly 1 (sampled, deterministic, and in the log-prob and entropy).
    """

    def __init__(self, in_size: int, action_space: spaces.MultiBinary, cfg: PolicyConfig):
        super().__init__()
        self.n = int(np.prod(action_space.shape, dtype=np.int64))
        self.nvec = [2] * self.n
        self.net = mlp(in_size, cfg.hidden_sizes, self.n, cfg.activation, out_gain=0.01,
                       layer_norm=cfg.layer_norm)

    @property
    def raw_action_dtype(self) -> torch.dtype:
        return torch.long

    @property
    def raw_action_shape(self) -> tuple[int, ...]:
        return (self.n,)

    @property
    def mask_size(self) -> int:
        return self.n

    def _mask(self, action_mask: torch.Tensor | None, batch: int) -> torch.Tensor | None:
        if action_mask is not None:
            check_mask_shape(action_mask, batch, self.n)
        return action_mask

    def sample(self, features: torch.Tensor, deterministic: bool = False, generator: torch.Generator | None = None,
               with_log_prob: bool = True, action_mask: torch.Tensor | None = None):
        """Return ``(bits [N, n], bits [N, n], log_prob [N] or None)``; deterministic sets the bits with logit > 0."""
        logits = self.net(features)
        mask = self._mask(action_mask, features.shape[0])
        if deterministic:
            bits = core.bernoulli_mode(logits, mask)
        else:
            uniform = torch.rand(logits.shape, generator=generator, device=logits.device, dtype=logits.dtype)
            bits = core.bernoulli_sample(logits, uniform, mask)
        log_prob = core.bernoulli_log_prob(logits, bits, mask) if with_log_prob else None
        return bits, bits, log_prob

    def _bits(self, raw_action: torch.Tensor, batch: int) -> torch.Tensor:
        if tuple(raw_action.shape) != (batch, self.n):
            raise ValueError(f"raw_action of shape {list(raw_action.shape)} does not match the action shape "
                             f"{[batch, self.n]}")
        return raw_action

    def log_prob(self, features: torch.Tensor, raw_action: torch.Tensor,
                 action_mask: torch.Tensor | None = None) -> torch.Tensor:
        mask = self._mask(action_mask, features.shape[0])
        return core.bernoulli_log_prob(self.net(features), self._bits(raw_action, features.shape[0]), mask)

    def evaluate(self, features: torch.Tensor, raw_action: torch.Tensor, generator: torch.Generator | None = None,
                 action_mask: torch.Tensor | None = None):
        """Return ``(log_prob [B], entropy [B])`` of stored bits ``[B, n]``."""
        logits = self.net(features)
        mask = self._mask(action_mask, features.shape[0])
        bits = self._bits(raw_action, features.shape[0])
        return core.bernoulli_log_prob(logits, bits, mask), core.bernoulli_entropy(logits, mask)

    def entropy_weight(self, action_mask: torch.Tensor) -> torch.Tensor:
        """``[B]`` per-state weights: ``n ln 2 / (free bits * ln 2)`` (0 where no bit is free)."""
        return core.entropy_weight(core.bernoulli_mask_as_categorical(action_mask), self.nvec)


def check_mask_shape(action_mask: torch.Tensor, batch: int, size: int) -> None:
    """Raise ValueError (one line) unless ``action_mask`` is ``[batch, size]`` bool."""
    if action_mask.dtype != torch.bool or tuple(action_mask.shape) != (batch, size):
        raise ValueError(f"action_mask must be a bool tensor of shape {[batch, size]}, got {action_mask.dtype} "
                         f"{list(action_mask.shape)}")


def make_actor(in_size: int, action_space: gym.Space, cfg: PolicyConfig) -> nn.Module:
    """The actor for an action space (the space was checked by shell.envs.check_action_space).

    A Dict or Tuple space gets a :class:`shell.policies.composite.CompositeActor` over its parts, linked by
    ``policy.action_links``.

    Raises:
        ConfigError: a Box the squashed Gaussian cannot serve; ``policy.action_links`` that do not fit the
            space (set for a space that is not a Dict or Tuple, or see CompositeActor).
    """
    if isinstance(action_space, COMPOSITES):
        from shell.policies.composite import CompositeActor  # built from this module's heads

        return CompositeActor(in_size, action_space, cfg, cfg.action_links)
    if cfg.action_links:
        raise ConfigError(f"policy.action_links needs a Dict or Tuple action space; this env's is "
                          f"{space_text(action_space)}")
    return make_leaf_actor(in_size, action_space, cfg)


def make_leaf_actor(in_size: int, action_space: gym.Space, cfg: PolicyConfig) -> nn.Module:
    """The head of a Box, Discrete, MultiDiscrete or MultiBinary space (alone, or a part of a composite)."""
    if isinstance(action_space, spaces.Box):
        return SquashedGaussianActor(in_size, action_space, cfg)
    if isinstance(action_space, spaces.MultiBinary):
        return BernoulliActor(in_size, action_space, cfg)
    return CategoricalActor(in_size, action_space, cfg)


def default_ent_coef(action_space: gym.Space, base_coef: float = 0.01) -> float:
    """0 for Box; ``normalized_entropy_coef(n)`` for Discrete(n); ``base / sum ln(n_i)`` for MultiDiscrete;
    ``base / (n ln 2)`` for MultiBinary of n bits; ``base`` for a Dict or Tuple, whose entropy weighs each part
    itself (shell.policies.composite)."""
    if isinstance(action_space, COMPOSITES):
        return base_coef
    if isinstance(action_space, spaces.Discrete):
        return core.normalized_entropy_coef(int(action_space.n), base_coef)
    if isinstance(action_space, spaces.MultiDiscrete):
        return core.multi_discrete_entropy_coef([int(n) for n in action_space.nvec], base_coef)
    if isinstance(action_space, spaces.MultiBinary):
        return core.multi_discrete_entropy_coef([2] * int(np.prod(action_space.shape, dtype=np.int64)), base_coef)
    return 0.0
