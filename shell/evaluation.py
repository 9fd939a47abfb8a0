"""Deterministic evaluation, checkpoint evaluation (the ``eval`` command), video, and a policy API."""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import gymnasium as gym
import numpy as np
import torch

from shell.actions import to_env_action
from shell.checkpoint import latest_checkpoint, load_checkpoint
from shell.config import Config, EnvConfig, config_from_saved
from shell.envs import eval_env_config as backend_eval_config
from shell.envs import make_env
from shell.errors import ConfigError
from shell.installation import install_hint
from shell.observations import obs_layout, to_tensor
from shell.stop import StopRequest

EVAL_SEED_OFFSET = 1_000_000
SOURCE_NAMES = {"factory": "an env factory", "vector_env": "a ready vector env"}  # checkpoint["env_source"]
DEFAULT_EVAL_MAX_EPISODE_STEPS = 10_000


class EvalResult(NamedTuple):
    """What a deterministic evaluation measured.

    Attributes:
        returns: the raw episodic return of each episode, in sub-env order.
        truncated: how many of them were truncated rather than terminated: by the env's own
            time limit, or by the cap ``max_episode_steps``.
        max_episode_steps: the cap that was applied (env steps per episode).
    """

    returns: list[float]
    truncated: int
    max_episode_steps: int


def eval_episode_cap(env_cfg: EnvConfig, run_cap: int | None, registered: int | None) -> int:
    """The step cap of one evaluation episode.

    ``run.eval_max_episode_steps`` if set, else the env's time limit (``env.max_episode_steps``,
    else the registered ``max_episode_steps``), else :data:`DEFAULT_EVAL_MAX_EPISODE_STEPS`.
    """
    return run_cap or env_cfg.max_episode_steps or registered or DEFAULT_EVAL_MAX_EPISODE_STEPS


def eval_env_config(env_cfg: EnvConfig) -> EnvConfig:
    """The env config evaluations run on: the one the training backend names
    (:func:`shell.envs.eval_env_config`: gymnasium's env of the same id for every backend but
    gymnasium), where a lost life does not end an episode (returns are whole games)."""
    return attrs.evolve(backend_eval_config(env_cfg), terminal_on_life_loss=False)


def evaluate(agent: torch.nn.Module, env_cfg: EnvConfig, episodes: int, seed: int, device: torch.device,
             render_mode: str | None = None, wrappers: list | None = None, stop: StopRequest | None = None,
             max_episode_steps: int | None = None, on_step: Callable[[], None] | None = None,
             source: Callable[[], gym.Env] | None = None) -> EvalResult:
    """Run ``episodes`` episodes with the deterministic policy (u = mean, or argmax).

    One sub-env per episode, seeded ``seed + EVAL_SEED_OFFSET + i`` so the
    evaluation never reuses a training seed; each sub-env's first episode counts.
    The agent is only read: no statistics of it change. Runs trained on the torch
    backend are evaluated on gymnasium's env of the same id (the reference
    implementation, parity-tested): the same initial states as a gymnasium-backend
    run of the same seed, so results compare across backends.

    An episode still running after ``max_episode_steps`` steps (see :func:`eval_episode_cap`
    for the default) ends there and counts as truncated, so an env that never ends its
    episodes cannot keep the evaluation running forever. ``on_step`` is called after every
    vector step (the runner's fault-injection point). ``source``, a ``Callable[[], gymnasium.Env]``,
    replaces the config's env id (runs trained from a factory).

    Raises:
        Interrupted: ``stop`` was requested (polled once per env step).
        ConfigError: a missing package for rendering.
    """
    if episodes <= 0:
        return EvalResult([], 0, 0)
    env_cfg = eval_env_config(env_cfg)
    env = make_env(env_cfg, device, num_envs=episodes, render_mode=render_mode, wrappers=wrappers, source=source)
    cap = eval_episode_cap(env_cfg, max_episode_steps, env.max_episode_steps)
    returns: list[float | None] = [None] * episodes
    truncated = 0
    try:
        obs = env.reset(seed=seed + EVAL_SEED_OFFSET)
        ep_return = np.zeros(episodes)
        ep_length = np.zeros(episodes, dtype=np.int64)
        state = agent.initial_state(episodes, device)  # a recurrent policy's state, carried through each episode
        start = torch.ones(episodes, dtype=torch.bool, device=device)
        with torch.inference_mode():
            while any(r is None for r in returns):
                if stop is not None:
                    stop.check()
                action, state = agent.act_step(obs, state, start, deterministic=True)
                step = env.step(action)
                if on_step is not None:
                    on_step()
                ep_return += step.reward.cpu().numpy()
                ep_length += 1
                terminated = step.terminated.cpu().numpy()
                ended_by_cap = ep_length >= cap
                done = terminated | step.truncated.cpu().numpy() | ended_by_cap
                for i in np.flatnonzero(done):
                    if returns[i] is None:
                        returns[i] = float(ep_return[i])
                        truncated += int(not terminated[i])
                ep_return[done] = 0.0
                ep_length[done] = 0
                start = step.terminated | step.truncated
                obs = step.obs
    except gym.error.DependencyNotInstalled as exc:
        raise ConfigError(f"rendering {env_cfg.id} needs a missing package ({exc}); "
                          f"run: {install_hint('video')}") from None
    finally:
        env.close()
    return EvalResult(returns, truncated, cap)


def build_agent(config: Config, device: torch.device, source: Any = None) -> tuple[torch.nn.Module, gym.Space]:
    """An untrained agent for the config's env (or ``source``'s), and the env's observation space.

    A one-env vector env is made to read the spaces.
    """
    from shell.policies import ActorCritic

    env = make_env(config.env, device, num_envs=1, source=source)
    try:
        agent = ActorCritic(env.observation_space, env.action_space, config.policy, config.env.normalize_obs,
                            config.env.obs_clip).to(device)
        return agent, env.observation_space
    finally:
        env.close()


def resolve_checkpoint(target: str | Path) -> Path:
    """A checkpoint file as given, or the newest in ``RUN_DIR/checkpoints``."""
    path = Path(target)
    if path.is_dir():
        return latest_checkpoint(path / "checkpoints" if (path / "checkpoints").is_dir() else path)
    if not path.exists():
        raise ConfigError(f"{target}: no such run dir or checkpoint")
    return path


def load_agent(target: str | Path, device: str | torch.device = "cpu",
               env: Any = None) -> tuple[torch.nn.Module, Config, dict]:
    """Load ``(agent, config, checkpoint state)`` from a run dir or checkpoint file, onto ``device``.

    ``env`` (a factory or vector env) gives the spaces of a run trained on one.

    Raises:
        ConfigError: missing, truncated or corrupt checkpoint; a factory run without ``env``.
    """
    agent, config, state, _ = _load(target, device, env)
    return agent, config, state


def _load(target: str | Path, device: str | torch.device,
          env: Any = None) -> tuple[torch.nn.Module, Config, dict, gym.Space]:
    from shell.runner import resolve_device

    device = resolve_device(device) if isinstance(device, str) else device
    path = resolve_checkpoint(target)
    state = load_checkpoint(path, map_location=device)
    kind = state.get("env_source")
    if kind is not None and env is None:
        what = SOURCE_NAMES[kind]
        raise ConfigError(f"{path} was trained on {what}, which its config cannot rebuild; use it from Python "
                          f"with env=<the same {what.split(' ', 1)[1]}>: "
                          f"shell.load_policy({str(target)!r}, env=...), export_policy(..., env=...)")
    config = config_from_saved(state["config"])
    agent, observation_space = build_agent(config, device, env)
    agent.load_state_dict(state["model"])
    agent.eval()
    return agent, config, state, observation_space


def eval_checkpoint(target: str | Path, episodes: int = 20, video: bool = False,
                    device: str = "cpu", stop: StopRequest | None = None) -> dict[str, Any]:
    """The ``eval`` command: evaluate a checkpoint, write ``eval.json`` beside it, return the result.

    ``summary.json`` of the run is left alone. With ``video``, one more
    deterministic episode is recorded as an mp4 in ``videos/`` beside the
    checkpoint, through gymnasium's RecordVideo (rgb_array rendering). Episodes
    are capped at the run's ``run.eval_max_episode_steps`` (see :func:`evaluate`).

    Raises:
        ConfigError: a bad target, a corrupt checkpoint, or a missing video extra.
        Interrupted: ``stop`` was requested; nothing is written.
    """
    path = resolve_checkpoint(target)
    if video:
        try:
            import moviepy  # noqa: F401 - RecordVideo needs it
        except ImportError:
            raise ConfigError(f"--video needs moviepy; run: {install_hint('video')}") from None
    agent, config, state = load_agent(path, device)
    dev = next(agent.parameters()).device
    cap = config.run.eval_max_episode_steps
    outcome = evaluate(agent, config.env, episodes, config.run.seed, dev, stop=stop, max_episode_steps=cap)
    result: dict[str, Any] = {
        "env_id": config.env.id,
        "seed": config.run.seed,
        "env_steps": state["env_steps"],
        **eval_fields(outcome),
        "checkpoint": str(path),
    }
    if video:
        os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
        folder = path.parent / "videos"
        wrapper = lambda env: gym.wrappers.RecordVideo(  # noqa: E731
            env, str(folder), episode_trigger=lambda i: i == 0, name_prefix=path.stem, disable_logger=True)
        evaluate(agent, config.env, 1, config.run.seed, dev, render_mode="rgb_array", wrappers=[wrapper],
                 stop=stop, max_episode_steps=cap)
        result["videos"] = sorted(str(p) for p in folder.glob(f"{path.stem}*.mp4"))
    (path.parent / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def eval_fields(outcome: EvalResult) -> dict[str, Any]:
    """The evaluation's keys of the summary and of eval.json."""
    returns = outcome.returns
    return {
        "eval_return_mean": statistics.fmean(returns) if returns else None,
        "eval_return_std": statistics.pstdev(returns) if returns else None,
        "eval_episodes": len(returns),
        "eval_truncated_episodes": outcome.truncated,
        "eval_max_episode_steps": outcome.max_episode_steps or None,
    }


class Policy:
    """A trained policy as a plain callable: observation(s) -> action(s), deterministic.

    Accepts one observation (shaped as the env's observation space, after the config's
    ``env.obs_keys`` filter and Atari chain; a dict for Dict spaces, extra keys ignored) or a
    batch ``[N, ...]``; returns numpy actions as the env takes them: the action
    space's shape and dtype, inside its bounds (shell.actions.to_env_action), with
    the same batch-ness as the input.

    A recurrent policy keeps its state per env between calls (row i of a batch is env i; one
    observation is env 0). Call :meth:`reset` before a new episode, for all envs or for some
    (``policy.reset([2])``), or pass ``episode_start`` (``[N]`` bool) to restart those rows.
    A call with a different batch size starts every env afresh.

    Args:
        agent: the ActorCritic.
        observation_space: the env's observation space.
        action_space: the env's action space; defaults to ``agent.action_space``.
    """

    def __init__(self, agent: torch.nn.Module, observation_space: gym.Space, action_space: gym.Space | None = None):
        self.agent = agent
        self.observation_space = observation_space
        self.action_space = action_space if action_space is not None else agent.action_space
        self.device = next(agent.parameters()).device
        self.layout = obs_layout(observation_space)
        self.state: torch.Tensor | None = None  # recurrent policies: [N, S] after the last call
        self._start: torch.Tensor | None = None  # rows whose next observation starts an episode

    @property
    def recurrent(self) -> bool:
        return bool(getattr(self.agent, "recurrent", False))

    def reset(self, env_indices: Any = None) -> None:
        """Start a new episode in every env (``None``) or in the given envs (recurrent policies;
        a no-op for feed-forward ones)."""
        if self._start is None or env_indices is None:
            self.state = self._start = None
        else:
            index = torch.as_tensor(env_indices, dtype=torch.long, device=self.device).reshape(-1)
            n = len(self._start)
            if len(index) and not (-n <= int(index.min()) and int(index.max()) < n):
                raise IndexError(f"Policy.reset({env_indices!r}): the policy holds the state of {n} env(s)")
            start = self._start.clone()  # a plain tensor: the stored one was made in inference mode
            start[index] = True
            self._start = start

    def __call__(self, obs: Any, episode_start: Any = None) -> np.ndarray:
        """The deterministic action(s): :meth:`act` with ``deterministic=True``."""
        return self.act(obs, True, episode_start)

    def act(self, obs: Any, deterministic: bool = True, episode_start: Any = None,
            generator: torch.Generator | None = None) -> np.ndarray:
        """Action(s) for one observation or a batch ``[N, ...]``, as numpy in the action space's
        shape and dtype; ``deterministic=False`` samples (from ``generator`` if given)."""
        if self.layout.is_dict:
            obs = {key: np.asarray(obs[key]) for key in self.layout.parts}
            single = all(obs[key].shape == tuple(p.space.shape) for key, p in self.layout.parts.items())
            batch = {key: value[None] for key, value in obs.items()} if single else obs
        else:
            obs = np.asarray(obs)
            single = obs.shape == tuple(self.observation_space.shape)
            batch = obs[None] if single else obs
        tensor = to_tensor(batch, self.layout, self.device)
        with torch.inference_mode():
            if not self.recurrent:
                return_action = self.agent.act(tensor, deterministic, generator)
            else:
                n = len(next(iter(batch.values())) if isinstance(batch, dict) else batch)
                if self.state is None or self.state.shape[0] != n:
                    self.state = self.agent.initial_state(n, self.device)
                    self._start = torch.ones(n, dtype=torch.bool, device=self.device)
                if episode_start is not None:
                    self._start |= torch.as_tensor(np.asarray(episode_start, dtype=bool).reshape(n),
                                                   device=self.device)
                return_action, self.state = self.agent.act_step(tensor, self.state, self._start, deterministic,
                                                                generator)
                self._start = torch.zeros_like(self._start)
            action = to_env_action(return_action, self.action_space)
        return action[0] if single else action


def load_policy(target: str | Path, device: str | torch.device = "cpu", env: Any = None) -> Policy:
    """Load a run dir's newest checkpoint (or a named checkpoint) as a :class:`Policy` on ``device``.

    A run trained from a factory or a ready vector env needs ``env`` (the same kind) for its spaces.

    Example:
        >>> policy = load_policy("runs/Pendulum-v1__s0__20260101-120000")
        >>> action = policy(env.reset()[0])
    """
    agent, _, _, observation_space = _load(target, device, env)
    return Policy(agent, observation_space)
