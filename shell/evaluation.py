"""Deterministic evaluation episodes, and checkpoint evaluation (the ``eval`` command, with video).

Loading a checkpoint and the deployable :class:`Policy` live in shell/inference.py; ``load_policy``,
``Policy`` and the other names that moved there are re-exported here for one release
(``from shell.evaluation import load_policy`` keeps working).
"""

from __future__ import annotations

import json
import os
import statistics
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import gymnasium as gym
import numpy as np
import torch

from shell.config import EnvConfig
from shell.envs import eval_env_config as backend_eval_config
from shell.envs import make_env
from shell.errors import ConfigError
from shell.inference import (
    SOURCE_NAMES,
    Policy,
    build_agent,
    load_agent,
    load_policy,
    require_env,
    resolve_checkpoint,
)
from shell.installation import install_hint
from shell.stop import StopRequest
from shell.tracking import log_videos

# SOURCE_NAMES, Policy, build_agent, load_agent, load_policy and resolve_checkpoint moved to shell.inference;
# they are re-exported here for one release
__all__ = ["DEFAULT_EVAL_MAX_EPISODE_STEPS", "EVAL_SEED_OFFSET", "SOURCE_NAMES", "EvalResult", "Policy", "build_agent",
           "eval_checkpoint", "eval_env_config", "eval_episode_cap", "eval_fields", "evaluate",
           "load_agent", "load_policy", "resolve_checkpoint"]

EVAL_SEED_OFFSET = 1_000_000
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
    else ``registered``: the env's own, see ``GymVecEnv.max_episode_steps``), else
    :data:`DEFAULT_EVAL_MAX_EPISODE_STEPS`.
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
                mask = env.action_mask  # [N, A] bool where the env gives masks: a masked action is never chosen
                if mask is None and getattr(agent, "action_mask_source", None) is not None:
                    raise ConfigError(f"the policy was trained with action masks (env.action_mask = "
                                      f"{agent.action_mask_source!r}) but the evaluation env {env_cfg.id!r} gives none")
                action, state = agent.act_step(obs, state, start, deterministic=True, action_mask=mask)
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


def eval_checkpoint(target: str | Path, episodes: int = 20, video: bool = False,
                    device: str = "cpu", stop: StopRequest | None = None, video_episodes: int = 1) -> dict[str, Any]:
    """The ``eval`` command: evaluate a checkpoint, write ``eval.json`` beside it, return the result.

    ``summary.json`` of the run is left alone. With ``video``, the first ``video_episodes`` evaluation
    episodes are played again, one at a time with the same seeds, and recorded as mp4s in ``videos/``
    beside the checkpoint (``<checkpoint>-episode-<i>.mp4``), through gymnasium's RecordVideo
    (rgb_array rendering); the result names them in ``videos``. A run tracked with W&B or MLflow
    (``run.loggers``) gets them too, in its tracker run (``videos_logged_to`` names the trackers).
    Episodes are capped at the run's ``run.eval_max_episode_steps`` (see :func:`evaluate`).

    Raises:
        ConfigError: a bad target, a corrupt checkpoint, a run trained on a factory or a ready
            vector env (its config cannot rebuild the env), a missing video extra, or
            ``video_episodes`` not in 1..``episodes``.
        Interrupted: ``stop`` was requested; eval.json is not written.
    """
    path = resolve_checkpoint(target)
    if video:
        if not 1 <= video_episodes <= episodes:
            raise ConfigError(f"--video-episodes {video_episodes} must be from 1 to --episodes ({episodes}): the "
                              "videos are of the first evaluation episodes")
        try:
            import moviepy  # noqa: F401 - RecordVideo needs it
        except ImportError:
            raise ConfigError(f"--video needs moviepy; run: {install_hint('video')}") from None
    agent, config, state = load_agent(path, device)
    require_env(path, state, None, f"evaluate it from Python on your env, with policy = shell.load_policy("
                                   f"{str(target)!r}); shell.resume(..., env={{env}}) continues it")
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
        prefix = f".{path.stem}-recording"
        recording = folder / f"{prefix}-episode-0.mp4"  # RecordVideo's name for the first episode

        def wrapper(env: gym.Env) -> gym.Env:
            with warnings.catch_warnings():  # the names are this checkpoint's: replacing its old videos is meant
                warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
                return gym.wrappers.RecordVideo(env, str(folder), episode_trigger=lambda i: i == 0, name_prefix=prefix,
                                                disable_logger=True)

        videos = []
        try:
            for i in range(video_episodes):  # one at a time: a recording holds its frames in memory
                # seed + i: the sub-env i of the evaluation above plays the same episode
                evaluate(agent, config.env, 1, config.run.seed + i, dev, render_mode="rgb_array", wrappers=[wrapper],
                         stop=stop, max_episode_steps=cap)
                if recording.exists():
                    videos.append(str(recording.replace(folder / f"{path.stem}-episode-{i}.mp4")))
        finally:
            recording.unlink(missing_ok=True)  # an interrupted one
        result.update(video_episodes=video_episodes, videos=videos)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        if run_dir is not None and videos:  # a tracked run: the videos go to its W&B / MLflow run too
            result["videos_logged_to"] = log_videos(run_dir, config.run.loggers, [Path(v) for v in videos],
                                                    config.run.tracker_timeout)
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
