"""Vector environments behind one small interface, with the autoreset details hidden.

Everything returned is a tensor on the configured device; numpy appears only
at the gymnasium boundary (one conversion per step).
"""

from __future__ import annotations

import signal
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shell.actions import box_action_layout, to_env_action
from shell.config import EnvConfig
from shell.errors import ConfigError, TrainingError

EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "moviepy": "video"}


class StepResult(NamedTuple):
    """One vector step, all tensors on the device.

    Attributes:
        obs: ``[N, S]`` float32, the observation to act on next (the reset
            observation for sub-envs whose episode just ended).
        reward: ``[N]`` float32.
        terminated: ``[N]`` bool.
        truncated: ``[N]`` bool (time limit, not termination).
        final_obs: ``[N, S]`` float32, the true last observation where an episode
            ended this step and ``obs`` elsewhere; ``None`` when the env knows that
            no episode was truncated without terminating (the gymnasium backend),
            as then no bootstrap needs it.
        episode_done: ``[N]`` bool, an episode ended this step; ``None`` (and the two
            fields below too) when the env knows that none did (the gymnasium backend).
        episode_return: ``[N]`` float32 raw return of that episode (where ``episode_done``).
        episode_length: ``[N]`` long, its length (where ``episode_done``).
    """

    obs: torch.Tensor
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: torch.Tensor | None
    episode_done: torch.Tensor | None
    episode_return: torch.Tensor | None
    episode_length: torch.Tensor | None


def check_observation_space(space: gym.Space) -> int:
    """Return the flat observation size, or raise ConfigError naming the space.

    Supported: Box of any shape (flattened) and Discrete(n) (one-hot).
    """
    if isinstance(space, spaces.Box):
        return int(np.prod(space.shape, dtype=np.int64))
    if isinstance(space, spaces.Discrete):
        return int(space.n)
    raise ConfigError(
        f"unsupported observation space {type(space).__name__}: {space}; supported: Box (any shape) and Discrete"
    )


def check_action_space(space: gym.Space) -> None:
    """Raise ConfigError (one line naming the space) for an action space the policies cannot serve.

    Served: Box of any shape (flattened; float or integer dtype, finite bounds, fixed
    ``low == high`` components held at their value, see :func:`shell.actions.box_action_layout`),
    Discrete(n >= 2, start) and MultiDiscrete(1-D nvec with an entry >= 2, start), of any
    integer dtype.
    """
    if isinstance(space, spaces.Box):
        box_action_layout(space)
        return
    if isinstance(space, spaces.Discrete):
        if space.n < 2:
            raise ConfigError(f"unsupported action space {space}: a Discrete action space needs n >= 2")
        return
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1 or not np.any(space.nvec >= 2):
            raise ConfigError(f"unsupported action space {space}: MultiDiscrete needs a 1-D nvec with an entry >= 2")
        return
    raise ConfigError(
        f"unsupported action space {space}; supported: Box with finite bounds, Discrete, MultiDiscrete"
    )


def _signal_free_worker(*args: Any) -> None:
    """gymnasium's AsyncVectorEnv worker, with SIGINT and SIGTERM ignored.

    Ctrl-C signals the whole process group. A worker that took it would die with a
    KeyboardInterrupt, print its traceback and break the next ``step`` before the main
    process could save a checkpoint. The main process alone answers signals and then
    closes its workers; a worker whose parent died ends on the closed pipe.
    """
    from gymnasium.vector.async_vector_env import _async_worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _async_worker(*args)


def _make_vec(cfg: EnvConfig, num_envs: int, render_mode: str | None = None,
              wrappers: list | None = None) -> gym.vector.VectorEnv:
    kwargs: dict[str, Any] = {}
    if wrappers:
        kwargs["wrappers"] = wrappers
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    vector_kwargs: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}
    if cfg.vectorization_mode == "async":
        vector_kwargs["worker"] = _signal_free_worker
    try:
        return gym.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode=cfg.vectorization_mode,
            vector_kwargs=vector_kwargs,
            **kwargs,
        )
    except gym.error.DependencyNotInstalled as exc:
        extra = next((e for k, e in EXTRAS.items() if k in str(exc).lower()), None)
        hint = f'pip install -e ".[{extra}]"' if extra else "install the package it names"
        raise ConfigError(f"env {cfg.id!r} needs a missing optional dependency; run: {hint}") from None
    except (gym.error.Error, ModuleNotFoundError, AttributeError, ValueError) as exc:
        msg = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise ConfigError(f"cannot make env {cfg.id!r}: {msg}") from None


def encode_obs(obs: np.ndarray, space: gym.Space, device: torch.device) -> torch.Tensor:
    """A batch of raw observations ``[N, ...]`` -> ``[N, S]`` float32 on ``device``.

    Box observations are flattened; Discrete(n, start) ones are one-hot encoded.
    """
    if isinstance(space, spaces.Discrete):
        index = torch.as_tensor(np.asarray(obs, dtype=np.int64) - int(space.start))
        return torch.nn.functional.one_hot(index, int(space.n)).to(device, torch.float32)
    flat = np.asarray(obs, dtype=np.float32).reshape(len(obs), -1)
    return torch.as_tensor(flat, device=device)


class GymVecEnv:
    """Gymnasium vector env (SAME_STEP autoreset) that speaks tensors.

    Sub-env i is seeded with ``seed + i`` at the first reset. The final
    observation of an ended episode comes from ``info["final_obs"]`` (stacked
    under ``info["_final_obs"]``), so no dummy transition enters a rollout.
    """

    def __init__(self, cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
                 wrappers: list | None = None):
        self.env = gym.wrappers.vector.RecordEpisodeStatistics(_make_vec(cfg, num_envs, render_mode, wrappers))
        self.num_envs = num_envs
        self.device = device
        spec = self.env.spec
        #: the time limit of one episode: the config's override, else the registered one (None = none)
        self.max_episode_steps = cfg.max_episode_steps or (spec.max_episode_steps if spec is not None else None)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        try:
            self.obs_size = check_observation_space(self.observation_space)
            check_action_space(self.action_space)
        except ConfigError:
            self.env.close()
            raise

    def _encode(self, obs: np.ndarray) -> torch.Tensor:
        return encode_obs(obs, self.observation_space, self.device)

    def reset(self, seed: int | None = None) -> torch.Tensor:
        obs, _ = self.env.reset(seed=seed)
        return self._encode(obs)

    def step(self, action: torch.Tensor) -> StepResult:
        """Step every sub-env with the policy's ``action`` (``[N, A]`` float Box, ``[N]`` or ``[N, K]`` long).

        The action is cast here, at the env boundary, to the space's shape and dtype and
        into its bounds (:func:`shell.actions.to_env_action`).

        Raises:
            TrainingError: the env raised (one line naming it and the error).
        """
        env_action = to_env_action(action, self.action_space)
        try:
            obs, reward, terminated, truncated, info = self.env.step(env_action)
        except Exception as exc:  # an env that raises ends training with exit 1
            name = self.env.spec.id if self.env.spec else "env"
            raise TrainingError(f"env {name} raised {type(exc).__name__}: {exc}") from exc
        final_obs = done = ep_return = ep_length = None
        # The final observation only matters for a truncation's bootstrap: skip it when nothing was truncated.
        if "_final_obs" in info and np.any(truncated & ~terminated):
            mask = info["_final_obs"]
            final = np.array(obs, copy=True)
            final[mask] = np.stack(info["final_obs"][mask])
            final_obs = self._encode(final)
        if "_episode" in info:
            done = torch.as_tensor(info["_episode"], device=self.device)
            ep_return = torch.as_tensor(np.asarray(info["episode"]["r"], dtype=np.float32), device=self.device)
            ep_length = torch.as_tensor(np.asarray(info["episode"]["l"], dtype=np.int64), device=self.device)
        return StepResult(
            obs=self._encode(obs),
            reward=torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device),
            terminated=torch.as_tensor(terminated, device=self.device),
            truncated=torch.as_tensor(truncated, device=self.device),
            final_obs=final_obs,
            episode_done=done,
            episode_return=ep_return,
            episode_length=ep_length,
        )

    def close(self) -> None:
        """Close the envs; never raises, even when async workers have died (their pipes are broken)."""
        try:
            self.env.close()
        except Exception:
            try:  # terminate what is left of the workers and close their pipes
                self.env.close(terminate=True)
            except Exception:
                pass


def make_env(cfg: EnvConfig, device: torch.device, num_envs: int | None = None, render_mode: str | None = None,
             wrappers: list | None = None):
    """Build the configured vector env (``num_envs`` defaults to ``cfg.num_envs``).

    ``backend = "gymnasium"`` gives a :class:`GymVecEnv`; ``backend = "torch"`` a batched
    tensor env from :mod:`shell.torch_envs` (rendering and wrappers need the gymnasium backend).
    ``wrappers`` (callables env -> env) wrap each sub-env, as in ``gym.make_vec``.

    Raises:
        ConfigError: unknown env id, missing optional extra, unsupported space, an id
            with no torch implementation, or rendering asked of the torch backend.
    """
    num_envs = num_envs or cfg.num_envs
    if cfg.backend == "torch":
        from shell.torch_envs import TORCH_ENVS

        if cfg.id not in TORCH_ENVS:
            raise ConfigError(f"env.backend = 'torch' has no env {cfg.id!r}; torch envs: {sorted(TORCH_ENVS)}")
        if render_mode is not None or wrappers:
            raise ConfigError("rendering and wrappers need env.backend = 'gymnasium'")
        return TORCH_ENVS[cfg.id](num_envs, device, cfg.max_episode_steps)
    return GymVecEnv(cfg, num_envs, device, render_mode, wrappers)
