"""Deterministic evaluation episodes, and checkpoint evaluation (the ``eval`` command, with video).

Loading a checkpoint and the deployable ``Policy`` live in shell/inference.py.
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

from shell.config import EnvConfig, PolicyConfig
from shell.envs import backend as env_backend
from shell.envs import eval_env_config as backend_eval_config
from shell.envs import make_env
from shell.errors import ConfigError
from shell.inference import load_agent, require_env, resolve_checkpoint
from shell.installation import install_hint
from shell.policies import AgentGroups
from shell.stop import StopRequest
from shell.tracking import log_videos

__all__ = ["DEFAULT_EVAL_MAX_EPISODE_STEPS", "EVAL_SEED_OFFSET", "EvalResult", "eval_checkpoint", "eval_env_config",
           "eval_episode_cap", "eval_fields", "evaluate"]

EVAL_SEED_OFFSET = 1_000_000
DEFAULT_EVAL_MAX_EPISODE_STEPS = 10_000


class EvalResult(NamedTuple):
    """What a deterministic evaluation measured.

    Attributes:
        returns: the raw episodic return of each episode, in sub-env order.
        truncated: how many of them were truncated rather than terminated: by the env's own
            time limit, or by the cap ``max_episode_steps``.
        max_episode_steps: the cap that was applied (env steps per episode).
        returns_per_agent: multi-agent envs: each episode's return per agent (the summed return over the
            number of agents that took part); None for single-agent envs.
        returns_per_group: multi-agent envs with several groups of agents: each episode's return summed
            over each group's agents; None otherwise.
    """

    returns: list[float]
    truncated: int
    max_episode_steps: int
    returns_per_agent: list[float] | None = None
    returns_per_group: dict[str, list[float]] | None = None


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
             source: Callable[[], gym.Env] | None = None, policy: PolicyConfig | None = None,
             frames: list | None = None) -> EvalResult:
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

    A multi-agent env (``env.backend = "pettingzoo"``) runs one copy per episode; an episode's return
    is the sum over its agents of each agent's return (``returns``; ``returns_per_agent`` divides it by
    the number of agents that took part) and it ends when its last agent is done. ``policy`` (the
    run's policy config) shapes the rows as in training (``policy.agent_id``, ``policy.critic``).
    ``frames`` (a list; with ``render_mode = "rgb_array"``) receives the first copy's frames of a
    multi-agent env until its first episode ends (``eval --video`` of such a run).

    Raises:
        Interrupted: ``stop`` was requested (polled once per env step).
        ConfigError: a missing package for rendering.
    """
    if episodes <= 0:
        return EvalResult([], 0, 0)
    env_cfg = eval_env_config(env_cfg)
    env = make_env(env_cfg, device, num_envs=episodes, render_mode=render_mode, wrappers=wrappers, source=source,
                   policy=policy)
    cap = eval_episode_cap(env_cfg, max_episode_steps, env.max_episode_steps)
    if getattr(env, "groups", None) is not None:  # a multi-agent env: copies of groups of agents
        return _evaluate_agents(agent, env, episodes, seed, device, cap, stop, on_step, frames)
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
                _require_mask(agent, mask, env_cfg.id)
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


def _require_mask(agent: torch.nn.Module, mask: torch.Tensor | None, env_id: str) -> None:
    """A policy trained with action masks acts only with them.

    Raises:
        ConfigError: the evaluation env gives no mask to such a policy.
    """
    if mask is None and getattr(agent, "action_mask_source", None) is not None:
        raise ConfigError(f"the policy was trained with action masks (env.action_mask = "
                          f"{agent.action_mask_source!r}) but the evaluation env {env_id!r} gives none")


def _evaluate_agents(agent: torch.nn.Module, env: Any, episodes: int, seed: int, device: torch.device, cap: int,
                     stop: StopRequest | None, on_step: Callable[[], None] | None,
                     frames: list | None = None) -> EvalResult:
    """:func:`evaluate` on a multi-agent env: ``episodes`` copies (one per episode; the copy's first episode
    counts), each group's rows acted on by its policy (``agent[group]`` of an :class:`AgentGroups`).
    Rows that are not valid (gone agents) add nothing; an episode's return is summed over every group."""
    groups = env.groups
    policies = {g: (agent[g] if isinstance(agent, AgentGroups) else agent) for g in groups}
    E = episodes
    returns: list[float | None] = [None] * E
    per_agent: list[float | None] = [None] * E
    per_group: dict[str, list[float | None]] = {g: [None] * E for g in groups}
    truncated = 0

    def valid_counts() -> np.ndarray:
        return sum(rows.valid.cpu().numpy().reshape(E, rows.rows_per_env) for rows in groups.values())

    try:
        obs = env.reset(seed=seed + EVAL_SEED_OFFSET)
        obs = obs if len(groups) > 1 else {next(iter(groups)): obs}
        ep_return = np.zeros(E)
        group_return = {g: np.zeros(E) for g in groups}
        ep_length = np.zeros(E, dtype=np.int64)
        took_part = np.concatenate([rows.valid.cpu().numpy().reshape(E, -1) for rows in groups.values()], axis=1)
        states = {g: policies[g].initial_state(rows.num_envs, device) for g, rows in groups.items()}
        starts = {g: torch.ones(rows.num_envs, dtype=torch.bool, device=device) for g, rows in groups.items()}
        if frames is not None:
            frames.append(env.render())
        with torch.inference_mode():
            while any(r is None for r in returns):
                if stop is not None:
                    stop.check()
                actions = {}
                for g, rows in groups.items():
                    mask = rows.action_mask
                    _require_mask(policies[g], mask, env.name)
                    actions[g], states[g] = policies[g].act_step(obs[g], states[g], starts[g], deterministic=True,
                                                                 action_mask=mask)
                results = env.step_groups(actions)
                if on_step is not None:
                    on_step()
                for g, rows in groups.items():
                    group_return[g] += results[g].reward.cpu().numpy().reshape(E, rows.rows_per_env).sum(axis=1)
                    ep_return += results[g].reward.cpu().numpy().reshape(E, rows.rows_per_env).sum(axis=1)
                ep_length += 1
                first = next(iter(groups))
                ended = results[first].episode_done.cpu().numpy().reshape(E, groups[first].rows_per_env)[:, 0]
                by_cap = ep_length >= cap
                if frames is not None and returns[0] is None and not (ended[0] or by_cap[0]):
                    frames.append(env.render())
                terminated = np.concatenate([results[g].terminated.cpu().numpy().reshape(E, -1) for g in groups],
                                            axis=1)
                for i in np.flatnonzero(ended | by_cap):
                    if returns[i] is None:
                        returns[i] = float(ep_return[i])
                        per_agent[i] = float(ep_return[i]) / max(1, int(took_part[i].sum()))
                        for g in groups:
                            per_group[g][i] = float(group_return[g][i])
                        truncated += int(by_cap[i] or not terminated[i].any())
                done = ended | by_cap
                ep_return[done] = 0.0
                for g in groups:
                    group_return[g][done] = 0.0
                ep_length[done] = 0
                now = np.concatenate([rows.valid.cpu().numpy().reshape(E, -1) for rows in groups.values()], axis=1)
                took_part = np.where(done[:, None], now, took_part | now)
                starts = {g: results[g].episode_start for g in groups}
                obs = {g: results[g].obs for g in groups}
    finally:
        env.close()
    return EvalResult(returns, truncated, cap, per_agent, per_group if len(groups) > 1 else None)


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
    outcome = evaluate(agent, config.env, episodes, config.run.seed, dev, stop=stop, max_episode_steps=cap,
                       policy=config.policy)
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
        if getattr(env_backend(config.env.backend), "MULTI_AGENT", False):  # not a gymnasium env: no RecordVideo
            videos = _record_agents(agent, config, path, folder, video_episodes, dev, stop, cap)
        try:
            for i in range(0 if videos else video_episodes):  # one at a time: a recording holds its frames in memory
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


def _record_agents(agent: torch.nn.Module, config: Any, path: Path, folder: Path, video_episodes: int,
                   device: torch.device, stop: StopRequest | None, cap: int | None) -> list[str]:
    """``eval --video`` of a multi-agent run: episode i replays evaluation episode i (seed + i) on one copy
    rendered as ``rgb_array``, written by gymnasium's ``save_video`` as ``<checkpoint>-episode-<i>.mp4``."""
    from gymnasium.utils.save_video import save_video

    videos = []
    for i in range(video_episodes):
        frames: list = []
        evaluate(agent, config.env, 1, config.run.seed + i, device, render_mode="rgb_array", stop=stop,
                 max_episode_steps=cap, policy=config.policy, frames=frames)
        prefix = f".{path.stem}-recording-{i}"
        save_video([f for f in frames if f is not None], str(folder), fps=10, name_prefix=prefix)
        recording = folder / f"{prefix}-episode-0.mp4"
        if recording.exists():
            videos.append(str(recording.replace(folder / f"{path.stem}-episode-{i}.mp4")))
    return videos


def eval_fields(outcome: EvalResult) -> dict[str, Any]:
    """The evaluation's keys of the summary and of eval.json."""
    returns = outcome.returns
    return {
        "eval_return_mean": statistics.fmean(returns) if returns else None,
        "eval_return_std": statistics.pstdev(returns) if returns else None,
        "eval_episodes": len(returns),
        "eval_truncated_episodes": outcome.truncated,
        "eval_max_episode_steps": outcome.max_episode_steps or None,
        **({} if outcome.returns_per_agent is None else {
            "eval_return_per_agent": statistics.fmean(outcome.returns_per_agent) if returns else None}),
        **({} if outcome.returns_per_group is None else {
            "eval_return_per_group": {g: statistics.fmean(r) for g, r in outcome.returns_per_group.items()}}),
    }
