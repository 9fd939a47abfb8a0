"""Batched environments written as tensor code: state ``[N, ...]`` on the configured device.

TorchPendulum and TorchCartPole reproduce gymnasium's Pendulum-v1 and CartPole-v1 (dynamics,
rewards, observation layout, bounds, initial-state distributions, termination and time limits)
for N envs at once, so rollout, storage and update never leave the device. They speak the same
interface as :class:`shell.envs.gymnasium.GymVecEnv` and autoreset like gymnasium's SAME_STEP mode: the
step that ends an episode returns the reset observation in ``obs`` and the true last one in
``final_obs``. State is float32 (gymnasium computes in float64; one step agrees to 1e-5).
Randomness comes from one ``torch.Generator`` on the device, seeded by ``reset(seed)``.
"""

from __future__ import annotations

import math

import attrs
import numpy as np
import torch
from gymnasium import spaces

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import StepResult, refuse_shares, refuse_wrappers
from shell.errors import ConfigError
from shell.seeding import ResetSeed, base_seed


class TorchVecEnv:
    """Shared bookkeeping: time limits, SAME_STEP autoreset, episode statistics.

    Subclasses define ``observation_space``, ``action_space``, ``max_episode_steps`` and
    ``_sample_state(n)``, ``_observe(state)``, ``_dynamics(state, action) -> (state, reward, terminated)``.
    """

    observation_space: spaces.Box
    action_space: spaces.Space
    max_episode_steps: int
    state_size: int
    action_mask: torch.Tensor | None = None  # the torch-native envs have no invalid actions
    mask_source: str | None = None

    def __init__(self, num_envs: int, device: torch.device, max_episode_steps: int | None = None):
        self.num_envs = num_envs
        self.device = torch.device(device)
        self.obs_size = int(np.prod(self.observation_space.shape))
        if max_episode_steps is not None:
            self.max_episode_steps = max_episode_steps
        self.generator = torch.Generator(self.device)
        self.state = torch.zeros((num_envs, self.state_size), device=self.device)
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self.episode_return = torch.zeros(num_envs, device=self.device)
        #: every row's next step is a real transition (SAME_STEP autoreset has no dummy steps)
        self.valid = torch.ones(num_envs, dtype=torch.bool, device=self.device)

    def _uniform(self, n: int, high: torch.Tensor) -> torch.Tensor:
        u = torch.rand((n, high.numel()), generator=self.generator, device=self.device)
        return (2.0 * u - 1.0) * high

    def reset(self, seed: ResetSeed | None = None) -> torch.Tensor:
        """Reset every sub-env; the one generator of the batch is seeded with the reset seed (a list's first:
        :func:`shell.seeding.base_seed`)."""
        seed = base_seed(seed)
        if seed is not None:
            self.generator.manual_seed(seed)
        self.state = self._sample_state(self.num_envs)
        self.elapsed.zero_()
        self.episode_return.zero_()
        return self._observe(self.state)

    def step(self, action: torch.Tensor) -> StepResult:
        state, reward, terminated = self._dynamics(self.state, action)
        self.elapsed += 1
        truncated = self.elapsed >= self.max_episode_steps  # both flags may be set, as in gymnasium
        done = terminated | truncated
        final_obs = self._observe(state)
        episode_return = self.episode_return + reward
        episode_length = self.elapsed.clone()
        # SAME_STEP autoreset: ended envs start their next episode in this same step.
        fresh = self._sample_state(self.num_envs)
        self.state = torch.where(done[:, None], fresh, state)
        self.elapsed = torch.where(done, 0, self.elapsed)
        self.episode_return = torch.where(done, 0.0, episode_return)
        return StepResult(obs=torch.where(done[:, None], self._observe(fresh), final_obs), reward=reward,
                          terminated=terminated, truncated=truncated, final_obs=final_obs, episode_done=done,
                          episode_return=episode_return, episode_length=episode_length)

    def close(self) -> None:
        pass


class TorchPendulum(TorchVecEnv):
    """Pendulum-v1: swing up and hold; 200-step time limit, never terminates.

    State ``[theta, theta_dot]``; observation ``[cos theta, sin theta, theta_dot]``; reward
    ``-(angle_normalize(theta)^2 + 0.1 theta_dot^2 + 0.001 u^2)`` with u clipped to [-2, 2];
    semi-implicit Euler with dt 0.05, g 10, m = l = 1, theta_dot clipped to [-8, 8]; initial
    state uniform in [-pi, pi] x [-1, 1].
    """

    max_speed, max_torque, dt, g, m, length = 8.0, 2.0, 0.05, 10.0, 1.0, 1.0
    max_episode_steps = 200
    state_size = 2
    observation_space = spaces.Box(-np.array([1.0, 1.0, 8.0], np.float32), np.array([1.0, 1.0, 8.0], np.float32))
    action_space = spaces.Box(-2.0, 2.0, (1,), np.float32)

    def _sample_state(self, n: int) -> torch.Tensor:
        return self._uniform(n, torch.tensor([math.pi, 1.0], device=self.device))

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        th, thdot = state.unbind(-1)
        return torch.stack((torch.cos(th), torch.sin(th), thdot), dim=-1)

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor):
        th, thdot = state.unbind(-1)
        u = action[:, 0].to(state.dtype).clamp(-self.max_torque, self.max_torque)
        angle = torch.remainder(th + math.pi, 2 * math.pi) - math.pi
        costs = angle.square() + 0.1 * thdot.square() + 0.001 * u.square()
        g, m, length = self.g, self.m, self.length
        newthdot = thdot + (3 * g / (2 * length) * torch.sin(th) + 3.0 / (m * length**2) * u) * self.dt
        newthdot = newthdot.clamp(-self.max_speed, self.max_speed)
        newth = th + newthdot * self.dt
        return torch.stack((newth, newthdot), dim=-1), -costs, torch.zeros_like(th, dtype=torch.bool)


class TorchCartPole(TorchVecEnv):
    """CartPole-v1: balance the pole; reward 1 per step (the terminating step included), 500-step limit.

    State and observation ``[x, x_dot, theta, theta_dot]``; Euler integration with tau 0.02,
    force +-10; terminates when ``|x| > 2.4`` or ``|theta| > 12 degrees``; initial state
    uniform in [-0.05, 0.05]^4.
    """

    gravity, masscart, masspole, length, force_mag, tau = 9.8, 1.0, 0.1, 0.5, 10.0, 0.02
    total_mass = masspole + masscart
    polemass_length = masspole * length
    theta_threshold = 12 * 2 * math.pi / 360
    x_threshold = 2.4
    max_episode_steps = 500
    state_size = 4
    _high = np.array([x_threshold * 2, np.inf, theta_threshold * 2, np.inf], dtype=np.float32)
    observation_space = spaces.Box(-_high, _high, dtype=np.float32)
    action_space = spaces.Discrete(2)

    def _sample_state(self, n: int) -> torch.Tensor:
        return self._uniform(n, torch.full((4,), 0.05, device=self.device))

    def _observe(self, state: torch.Tensor) -> torch.Tensor:
        return state

    def _dynamics(self, state: torch.Tensor, action: torch.Tensor):
        x, x_dot, theta, theta_dot = state.unbind(-1)
        force = torch.where(action == 1, self.force_mag, -self.force_mag)
        costheta, sintheta = torch.cos(theta), torch.sin(theta)
        temp = (force + self.polemass_length * theta_dot.square() * sintheta) / self.total_mass
        thetaacc = (self.gravity * sintheta - costheta * temp) / (
            self.length * (4.0 / 3.0 - self.masspole * costheta.square() / self.total_mass))
        xacc = temp - self.polemass_length * thetaacc * costheta / self.total_mass
        new = torch.stack((x + self.tau * x_dot, x_dot + self.tau * xacc,
                           theta + self.tau * theta_dot, theta_dot + self.tau * thetaacc), dim=-1)
        # compared in float64 like gymnasium: float32(2.4) is above 2.4 and must terminate
        terminated = (new[:, 0].double().abs() > self.x_threshold) | (new[:, 2].double().abs() > self.theta_threshold)
        return new, torch.ones_like(x), terminated


TORCH_ENVS = {"Pendulum-v1": TorchPendulum, "CartPole-v1": TorchCartPole}


def check_config(cfg: EnvConfig) -> None:
    """Raises ConfigError for ``env.action_mask`` other than "auto" or "none" (the torch envs have no masks),
    ``env.wrappers``, and an id with no torch implementation."""
    if cfg.action_mask not in ("auto", "none"):
        raise ConfigError(f"env.action_mask = {cfg.action_mask!r}: the torch-native envs have no action masks")
    refuse_wrappers(cfg)
    refuse_shares(cfg)
    if cfg.id not in TORCH_ENVS:
        raise ConfigError(f"env.backend = 'torch' has no env {cfg.id!r}; torch envs: {sorted(TORCH_ENVS)}")


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Evaluated on gymnasium's env of the same id (the reference the torch envs are tested against)."""
    return attrs.evolve(cfg, backend="gymnasium")


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> TorchVecEnv:
    """``num_envs`` copies of ``cfg.id``'s torch env, state on ``device``.

    Raises:
        ConfigError: see :func:`check_config`.
    """
    check_config(cfg)
    return TORCH_ENVS[cfg.id](num_envs, device, cfg.max_episode_steps)
