"""Deterministic evaluation episodes, and checkpoint evaluation (the ``eval`` command, with video).

Loading a checkpoint and the deployable ``Policy`` live in shell/inference.py.
"""

from __future__ import annotations

import json
import os
import statistics
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import gymnasium as gym
import numpy as np
import torch

from shell.config import EnvConfig, PolicyConfig
from shell.envs import Rows, make_lanes
from shell.envs import eval_env_config as backend_eval_config
from shell.envs.masks import require_mask
from shell.errors import ConfigError, TrainingError
from shell.inference import load_agent, require_env, resolve_checkpoint
from shell.installation import install_hint
from shell.ratings import POLICY, MatchTable
from shell.seeding import eval_seeds, opponent_seed, rating_seed
from shell.selfplay import Bot, bot_move, import_bots, snapshot_name, snapshot_players
from shell.stop import StopRequest
from shell.tracking import log_videos

__all__ = ["DEFAULT_EVAL_MAX_EPISODE_STEPS", "Bot", "BotOpponent", "EvalResult", "RandomOpponent", "SeatOpponent",
           "SnapshotOpponent", "eval_checkpoint", "eval_env_config", "eval_episode_cap", "eval_fields", "evaluate",
           "resolve_opponents"]

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
        returns_per_opponent: turn-based games (see :func:`evaluate`): against each evaluation opponent
            (``run.eval_opponents``, in order, then each snapshot of the self-play pool, oldest first), the
            policy's score in each episode by the seat it played; None otherwise.
        ratings: turn-based games: every player's Elo rating (:class:`shell.ratings.MatchTable`: ``"random"`` =
            0, the bots, ``"snapshot@<update>"`` for each snapshot, ``"policy"``); None otherwise.
    """

    returns: list[float]
    truncated: int
    max_episode_steps: int
    returns_per_agent: list[float] | None = None
    returns_per_group: dict[str, list[float]] | None = None
    render_fps: int | None = None  # the env's frame rate (its metadata's render_fps), for videos
    returns_per_opponent: dict[str, dict[str, list[float]]] | None = None
    ratings: dict[str, float | None] | None = None


class SeatOpponent:
    """A turn-based game's evaluation opponent: copy i's policy plays seat ``i % S`` (the S seats in lane order, so
    the copies cover the seats in turn), and the opponent (:meth:`moves`) every other seat.

    Args:
        name: the opponent's name (``run.eval_opponents``' entry).
        specs: the env's lanes (each :class:`shell.envs.base.LaneSpec` with its ``agents``).
        copies: the env's copies E.
        device: where the actions are.
    """

    def __init__(self, name: str, specs: dict, copies: int, device: torch.device):
        self.name = name
        self.seats = [agent for spec in specs.values() for agent in spec.agents]
        #: the seat the policy plays in each copy
        self.policy_seat = [self.seats[i % len(self.seats)] for i in range(copies)]
        #: per lane, ``[N]`` bool: the rows the policy plays (copy-major rows, a seat per row)
        self.policy_rows = {g: torch.tensor([agent == self.policy_seat[i] for i in range(copies)
                                             for agent in spec.agents], device=device) for g, spec in specs.items()}
        self.moves_of = {g: int(spec.action_space.n) for g, spec in specs.items()}

    @staticmethod
    def serves(specs: dict) -> bool:
        """A turn-based game whose seats all take Discrete actions (a uniform legal move is defined)."""
        return all(spec.turns and isinstance(spec.action_space, gym.spaces.Discrete) for spec in specs.values())

    def moves(self, lane: Any, rows: Rows) -> torch.Tensor:
        """``[N]`` long: the opponent's move in every row (read only in its rows that are to move)."""
        raise NotImplementedError

    def actions(self, lane: Any, policy_actions: torch.Tensor, rows: Rows) -> torch.Tensor:
        """``[N]`` the policy's actions in its rows, the opponent's (:meth:`moves`) elsewhere."""
        return torch.where(self.policy_rows[lane], policy_actions, self.moves(lane, rows).to(policy_actions.dtype))

    def score(self, lane: Any, reward: torch.Tensor, copies: int) -> np.ndarray:
        """``[E]`` the reward of the policy's seat in each copy (0 where the lane holds another seat)."""
        mine = torch.where(self.policy_rows[lane], reward, 0.0)
        return mine.cpu().numpy().reshape(copies, -1).sum(axis=1)


class RandomOpponent(SeatOpponent):
    """:class:`SeatOpponent` ``"random"``: a uniform move among the legal ones (every action without a mask).

    Args:
        specs, copies, device: as :class:`SeatOpponent`.
        seed: the seed of the opponent's moves.
    """

    def __init__(self, specs: dict, copies: int, seed: int, device: torch.device):
        super().__init__("random", specs, copies, device)
        self.generator = torch.Generator(device).manual_seed(seed)

    def moves(self, lane: Any, rows: Rows) -> torch.Tensor:
        mask = rows.action_mask
        n = len(rows.valid)
        legal = mask.float() if mask is not None else torch.ones(n, self.moves_of[lane], device=rows.valid.device)
        return torch.multinomial(legal, 1, generator=self.generator).squeeze(1)


class BotOpponent(SeatOpponent):
    """:class:`SeatOpponent` of a user's :data:`Bot`, called once per move of its seat.

    Args:
        name: ``"module:function"``, as the config names it.
        bot: the function.
        specs, copies, device: as :class:`SeatOpponent`.
    """

    def __init__(self, name: str, bot: Bot, specs: dict, copies: int, device: torch.device):
        super().__init__(name, specs, copies, device)
        self.bot = bot

    def moves(self, lane: Any, rows: Rows) -> torch.Tensor:
        """The bot's moves in its rows to move (0 elsewhere, never sent).

        Raises:
            TrainingError: the bot returned an illegal move (or no integer), naming the bot and the move.
        """
        out = torch.zeros(len(rows.valid), dtype=torch.long)
        n = self.moves_of[lane]
        mask = None if rows.action_mask is None else rows.action_mask.cpu().numpy()
        for i in torch.nonzero(rows.valid & ~self.policy_rows[lane]).flatten().tolist():
            legal = np.ones(n, dtype=bool) if mask is None else mask[i]
            out[i] = bot_move("evaluation opponent", self.name, self.bot, rows.obs, i, legal)
        return out.to(rows.valid.device)


class SnapshotOpponent(SeatOpponent):
    """:class:`SeatOpponent` of a snapshot of the self-play pool: it plays as it does in training, sampling its
    policy under the row's mask (with its own observation statistics).

    Args:
        name: ``"snapshot@<update>"`` (:func:`shell.selfplay.snapshot_name`).
        player: the snapshot (one lane's policy).
        specs, copies, device: as :class:`SeatOpponent`.
        seed: the seed of its sampled moves.
    """

    def __init__(self, name: str, player: torch.nn.Module, specs: dict, copies: int, device: torch.device,
                 seed: int):
        super().__init__(name, specs, copies, device)
        self.player = player
        self.generator = torch.Generator(device).manual_seed(seed)

    def moves(self, lane: Any, rows: Rows) -> torch.Tensor:
        return self.player.act(rows.obs, deterministic=False, generator=self.generator,
                               action_mask=rows.action_mask)


def resolve_opponents(names: Sequence[str]) -> dict[str, Bot | None]:
    """Each ``run.eval_opponents`` entry with its bot (None for ``"random"``), imported now
    (:func:`shell.selfplay.import_bots`).

    Raises:
        ConfigError: one line, an entry that cannot be imported or is not callable.
    """
    return import_bots(names, "run.eval_opponents")


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
             frames: list | None = None, seed_scheme: str = "spawn", first_episode: int = 0,
             opponents: Sequence[str] = ("random",), snapshots: dict[int, torch.nn.Module] | None = None,
             rating_games: dict[tuple[str, str], list[float]] | None = None) -> EvalResult:
    """Run ``episodes`` episodes with the deterministic policy (u = mean, or argmax), one loop for a run of
    one lane or several (each lane's rows acted on by its policy, ``agent.lanes()``).

    One env copy per episode, episode i seeded by ``seed_scheme`` from the run's ``seed``
    (:func:`shell.seeding.eval_seeds`: its own stream, never a training one; with ``"offset"``,
    ``seed + 1,000,000 + i``); each copy's first episode counts. ``first_episode`` evaluates
    episodes from that index on (``eval --video`` replays episode i alone).
    The agent is only read: no statistics of it change. Runs trained on the torch
    backend are evaluated on gymnasium's env of the same id (the reference
    implementation, parity-tested): the same initial states as a gymnasium-backend
    run of the same seed, so results compare across backends.

    An episode's return is the sum over its agents of each agent's return (one agent in a single-agent
    env); for a multi-agent env ``returns_per_agent`` divides it by the number of agents that took part,
    and with several groups ``returns_per_group`` keeps each group's sum.

    A turn-based game with Discrete actions is played against each of ``opponents`` in turn
    (``run.eval_opponents``: ``"random"``, uniform over the legal moves, :class:`RandomOpponent`; or a bot
    ``"module:function"``, :class:`BotOpponent`), ``episodes`` games each on the same seeds: the policy plays
    seat ``i % S`` of copy i and the opponent the other seats. An episode's return is the policy's own score
    (+1 win, 0 draw, -1 loss in the classic games: the game's own rewards), so ``returns`` (and the summary's
    ``eval_return_mean``) are the scores against the FIRST opponent over both seats, and ``returns_per_opponent``
    keeps every opponent's scores by the seat the policy played (self-play's sum over the seats is 0 in a
    zero-sum game and says nothing).

    ``snapshots`` (the self-play pool's, by the update after which each was taken) are opponents too
    (:class:`SnapshotOpponent`, ``"snapshot@<update>"``, after the named ones), and the game's players are rated
    (``ratings``, :class:`shell.ratings.MatchTable`): the policy's games against every opponent, and ``episodes``
    games of each snapshot (sampling, as in training) against each named opponent and each other snapshot, count
    in one Elo fit anchored at ``"random"`` = 0. A snapshot's games have seeds of their own
    (:func:`shell.seeding.rating_seed`), so they give the same results in every evaluation; ``rating_games`` (a
    dict the caller keeps between evaluations) keeps their scores, by pair of names, and they are played once.

    A copy's episode ends when the env says so (the last agent of a multi-agent copy is done). An episode still
    running after ``max_episode_steps`` steps (see :func:`eval_episode_cap` for the default) ends there and
    counts as truncated, so an env that never ends its episodes cannot keep the evaluation running forever.
    ``on_step`` is called after every joint step (the runner's fault-injection point). ``source``, a
    ``Callable[[], gymnasium.Env]``, replaces the config's env id (runs trained from a factory).
    ``policy`` (the run's policy config) shapes a multi-agent env's rows as in training
    (``policy.agent_id``, ``policy.critic``). ``frames`` (a list; with ``render_mode = "rgb_array"``)
    receives the first copy's frames until its first episode ends (``eval --video``; the first opponent's).

    Raises:
        Interrupted: ``stop`` was requested (polled once per env step).
        ConfigError: a missing package for rendering; a policy trained with masks on an env without them; an
            opponent that cannot be imported (:func:`resolve_opponents`).
        TrainingError: a bot returned an illegal move.
    """
    if episodes <= 0:
        return EvalResult([], 0, 0)
    bots = resolve_opponents(opponents)
    env_cfg = eval_env_config(env_cfg)
    env = make_lanes(env_cfg, device, num_envs=episodes, render_mode=render_mode, wrappers=wrappers, source=source,
                     policy=policy)
    cap = eval_episode_cap(env_cfg, max_episode_steps, env.max_episode_steps)
    specs, E = env.lanes, env.copies
    snapshots = dict(snapshots or {})
    rated = SeatOpponent.serves(specs)
    table = MatchTable()
    try:
        if rated:
            sides: list[SeatOpponent | None] = [
                RandomOpponent(specs, E, opponent_seed(seed, seed_scheme), device) if bot is None
                else BotOpponent(name, bot, specs, E, device) for name, bot in bots.items()]
            sides += [SnapshotOpponent(snapshot_name(u), player, specs, E, device, rating_seed(seed, seed_scheme, 0, u))
                      for u, player in snapshots.items()]
        else:
            sides = [None]
        games = []
        for k, opponent in enumerate(sides):
            games.append(_episodes(agent, env, env_cfg, cap, seed, seed_scheme, episodes, first_episode, device,
                                   stop, on_step, frames if k == 0 else None, opponent))
            if opponent is not None:
                table.record(POLICY, opponent.name, games[-1][0])
        if rated and snapshots:
            _snapshot_games(table, env, env_cfg, cap, seed, seed_scheme, episodes, first_episode, device, stop,
                            on_step, bots, snapshots, {} if rating_games is None else rating_games)
    except gym.error.DependencyNotInstalled as exc:
        raise ConfigError(f"rendering {env_cfg.id} needs a missing package ({exc}); "
                          f"run: {install_hint('video')}") from None
    finally:
        env.close()
    returns, per_agent, per_group, truncated = games[0]
    several_agents = any(spec.agents is not None for spec in specs.values())
    per_opponent = None if sides[0] is None else {
        side.name: {seat: [r for r, played in zip(game[0], side.policy_seat, strict=True) if played == seat]
                    for seat in side.seats} for side, game in zip(sides, games, strict=True)}
    return EvalResult(returns, truncated, cap, per_agent if several_agents and per_opponent is None else None,
                      per_group if len(specs) > 1 else None, env.render_fps, per_opponent,
                      table.elo() if rated else None)


def _snapshot_games(table: MatchTable, env: Any, env_cfg: EnvConfig, cap: int, seed: int, seed_scheme: str,
                    episodes: int, first_episode: int, device: torch.device, stop: StopRequest | None,
                    on_step: Callable[[], None] | None, bots: dict[str, Bot | None],
                    snapshots: dict[int, torch.nn.Module], played: dict[tuple[str, str], list[float]]) -> None:
    """The rating games of :func:`evaluate` between the pool's snapshots and the named opponents (``bots``), and
    between the snapshots, into ``table``: ``episodes`` games per pair, the first-named snapshot sampling its moves
    as the "policy" of :func:`_episodes`. ``played`` keeps each pair's scores (the first snapshot's), keyed by the
    names: a pair already there is not played again."""
    specs, E = env.lanes, env.copies
    order = sorted(snapshots)
    names = {snapshot_name(u) for u in order}
    for gone in [pair for pair in played if not names.issuperset(p for p in pair if p.startswith("snapshot@"))]:
        del played[gone]  # a snapshot that left the pool
    for a, u in enumerate(order):
        rivals: list[tuple[tuple[int, ...], SeatOpponent]] = [
            ((1, u, k), RandomOpponent(specs, E, rating_seed(seed, seed_scheme, 2, u, k), device) if bot is None
             else BotOpponent(name, bot, specs, E, device)) for k, (name, bot) in enumerate(bots.items())]
        rivals += [((3, u, v), SnapshotOpponent(snapshot_name(v), snapshots[v], specs, E, device,
                                                rating_seed(seed, seed_scheme, 4, u, v))) for v in order[a + 1:]]
        for key, opponent in rivals:
            pair = (snapshot_name(u), opponent.name)
            if pair not in played:
                sampling = torch.Generator(device).manual_seed(rating_seed(seed, seed_scheme, *key))
                played[pair] = _episodes(snapshots[u], env, env_cfg, cap, seed, seed_scheme, episodes, first_episode,
                                         device, stop, on_step, None, opponent, sampling)[0]
            table.record(*pair, played[pair])


def _episodes(agent: torch.nn.Module, env: Any, env_cfg: EnvConfig, cap: int, seed: int, seed_scheme: str,
              episodes: int, first_episode: int, device: torch.device, stop: StopRequest | None,
              on_step: Callable[[], None] | None, frames: list | None, opponent: SeatOpponent | None,
              sampling: torch.Generator | None = None) -> tuple[list[float], list[float], dict[Any, list[float]], int]:
    """The episodes of :func:`evaluate` on ``env`` (reset with the evaluation seeds), against ``opponent`` in a
    turn-based game: each copy's returns, per agent, per group, and how many were truncated. The agent plays its
    deterministic moves, or samples them from ``sampling`` where given (a snapshot's rating games)."""
    specs = env.lanes
    E = env.copies
    returns: list[float | None] = [None] * E
    per_agent: list[float | None] = [None] * E
    per_group: dict[Any, list[float | None]] = {g: [None] * E for g in specs}
    truncated = 0
    policies = _lane_policies(agent, specs)
    rows = env.reset(seed=eval_seeds(seed, seed_scheme, episodes, first_episode))
    ep_return = np.zeros(E)
    group_return = {g: np.zeros(E) for g in specs}
    ep_length = np.zeros(E, dtype=np.int64)
    took_part = _by_copy([rows[g].valid for g in specs], E)
    states = {g: policies[g].initial_state(spec.num_envs, device) for g, spec in specs.items()}
    starts = {g: torch.ones(spec.num_envs, dtype=torch.bool, device=device) for g, spec in specs.items()}
    if frames is not None:
        frames.append(env.render())
    first = next(iter(specs))
    with torch.inference_mode():
        while any(r is None for r in returns):
            if stop is not None:
                stop.check()
            actions = {}
            for g in specs:
                mask = rows[g].action_mask  # [N, A] bool where the env gives masks: never a masked action
                require_mask(policies[g], mask, f"the evaluation env {env_cfg.id!r}", error=ConfigError)
                actions[g], states[g] = policies[g].act_step(rows[g].obs, states[g], starts[g],
                                                             deterministic=sampling is None, generator=sampling,
                                                             action_mask=mask)
                if opponent is not None:
                    actions[g] = opponent.actions(g, actions[g], rows[g])
            results = env.step(actions)
            if on_step is not None:
                on_step()
            for g, spec in specs.items():
                reward = results[g].reward.cpu().numpy().reshape(E, spec.rows_per_copy).sum(axis=1)
                if not np.isfinite(reward).all():  # a NaN return would be reported as a score (or break its std)
                    bad = reward[~np.isfinite(reward)][0]
                    raise TrainingError(f"env {env_cfg.id!r} gave a non-finite reward ({bad}) in an evaluation episode")
                group_return[g] += reward
                ep_return += reward if opponent is None else opponent.score(g, results[g].reward, E)
            ep_length += 1
            ended = results[first].ended.cpu().numpy()
            by_cap = ep_length >= cap
            if frames is not None and returns[0] is None and not (ended[0] or by_cap[0]):
                frames.append(env.render())
            terminated = _by_copy([results[g].terminated for g in specs], E)
            for i in np.flatnonzero(ended | by_cap):
                if returns[i] is None:
                    returns[i] = float(ep_return[i])
                    per_agent[i] = float(ep_return[i]) / max(1, int(took_part[i].sum()))
                    for g in specs:
                        per_group[g][i] = float(group_return[g][i])
                    truncated += int(not terminated[i].any())
            done = ended | by_cap
            ep_return[done] = 0.0
            for g in specs:
                group_return[g][done] = 0.0
            ep_length[done] = 0
            now = _by_copy([results[g].valid for g in specs], E)
            took_part = np.where(done[:, None], now, took_part | now)
            starts = {g: (results[g].terminated | results[g].truncated) if results[g].episode_start is None
                      else results[g].episode_start for g in specs}
            rows = {g: Rows(results[g].obs, results[g].valid, results[g].action_mask) for g in specs}
    return returns, per_agent, per_group, truncated


def _lane_policies(agent: torch.nn.Module, specs: dict) -> dict:
    """Each of the env's lanes with its policy (``agent.lanes()``, in the same order).

    Raises:
        ConfigError: the agent has a policy for another number of lanes than the env has.
    """
    lanes = list(agent.lanes().values())
    if len(lanes) != len(specs):
        raise ConfigError(f"the policy has {len(lanes)} lane(s) and the env {len(specs)} group(s) of agents; "
                          "evaluate it on the env it was trained on")
    return dict(zip(specs, lanes, strict=True))


def _by_copy(per_lane: list[torch.Tensor], copies: int) -> np.ndarray:
    """``[copies, rows of every lane in that copy]`` from each lane's ``[N]`` copy-major rows."""
    return np.concatenate([t.cpu().numpy().reshape(copies, -1) for t in per_lane], axis=1)


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
            import moviepy  # noqa: F401 - save_video needs it
        except ImportError:
            raise ConfigError(f"--video needs moviepy; run: {install_hint('video')}") from None
    agent, config, state = load_agent(path, device)
    require_env(path, state, None, f"evaluate it from Python on your env, with policy = shell.load_policy("
                                   f"{str(target)!r}); shell.resume(..., env={{env}}) continues it")
    dev = next(agent.parameters()).device
    cap = config.run.eval_max_episode_steps
    outcome = evaluate(agent, config.env, episodes, config.run.seed, dev, stop=stop, max_episode_steps=cap,
                       policy=config.policy, seed_scheme=config.run.seed_scheme,
                       opponents=config.run.eval_opponents, snapshots=snapshot_players(agent, state.get("selfplay")))
    result: dict[str, Any] = {
        "env_id": config.env.id,
        "seed": config.run.seed,
        "env_steps": state["env_steps"],
        **eval_fields(outcome),
        "checkpoint": str(path),
    }
    if video:
        videos = _record(agent, config, path, video_episodes, dev, stop, cap)
        result.update(video_episodes=video_episodes, videos=videos)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        if run_dir is not None and videos:  # a tracked run: the videos go to its W&B / MLflow run too
            result["videos_logged_to"] = log_videos(run_dir, config.run.loggers, [Path(v) for v in videos],
                                                    config.run.tracker_timeout)
    (path.parent / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _record(agent: torch.nn.Module, config: Any, path: Path, video_episodes: int, device: torch.device,
            stop: StopRequest | None, cap: int | None) -> list[str]:
    """``eval --video``: episode i replays evaluation episode i (its own seed) on one copy rendered as ``rgb_array``,
    written by gymnasium's ``save_video`` (at the env's ``render_fps``) as ``videos/<checkpoint>-episode-<i>.mp4``.
    One at a time: a recording holds its frames in memory."""
    from gymnasium.utils.save_video import save_video

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
    folder = path.parent / "videos"
    videos = []
    for i in range(video_episodes):
        frames: list = []
        outcome = evaluate(agent, config.env, 1, config.run.seed, device, render_mode="rgb_array", stop=stop,
                           max_episode_steps=cap, policy=config.policy, frames=frames,
                           seed_scheme=config.run.seed_scheme, first_episode=i)
        prefix = f".{path.stem}-recording-{i}"
        recording = folder / f"{prefix}-episode-0.mp4"
        try:
            with warnings.catch_warnings():  # the names are this checkpoint's: replacing its old videos is meant
                warnings.filterwarnings("ignore", message=".*Overwriting existing videos")
                save_video([f for f in frames if f is not None], str(folder), fps=outcome.render_fps or 30,
                           name_prefix=prefix)
            if recording.exists():
                videos.append(str(recording.replace(folder / f"{path.stem}-episode-{i}.mp4")))
        finally:
            recording.unlink(missing_ok=True)  # an interrupted one
    return videos


def eval_fields(outcome: EvalResult) -> dict[str, Any]:
    """The evaluation's keys of the summary and of eval.json. A turn-based game adds ``eval_vs``: for each evaluation
    opponent (then each snapshot of the self-play pool), by the seat the policy played, its ``win``, ``draw`` and
    ``loss`` rates and its ``games``; ``eval_return_mean`` is then the policy's mean score against the first
    opponent over both seats. It adds ``elo`` too: every player's Elo rating (``"random"`` = 0, see
    :class:`shell.ratings.MatchTable`), the policy's under ``"policy"``."""
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
        **({} if outcome.returns_per_opponent is None else {
            "eval_vs": {name: {seat: _outcomes(scores) for seat, scores in seats.items()}
                        for name, seats in outcome.returns_per_opponent.items()}}),
        **({} if outcome.ratings is None else {"elo": outcome.ratings}),
    }


def _outcomes(scores: list[float]) -> dict[str, Any]:
    """A seat's games as win, draw and loss rates (by the sign of the policy's score) and their count."""
    n = len(scores)
    rate = (lambda k: k / n) if n else (lambda k: None)
    return {"win": rate(sum(s > 0 for s in scores)), "draw": rate(sum(s == 0 for s in scores)),
            "loss": rate(sum(s < 0 for s in scores)), "games": n}
