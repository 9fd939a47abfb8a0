"""Deterministic evaluation episodes, and checkpoint evaluation (the ``eval`` command, with video).

Loading a checkpoint and the deployable ``Policy`` live in shell/inference.py; a game's opponents, seats and
ratings in shell/games/.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import attrs
import gymnasium as gym
import numpy as np
import torch

from shell.config import Config, EnvConfig, PolicyConfig
from shell.envs import Rows, make_lanes
from shell.envs import eval_env_config as backend_eval_config
from shell.envs.masks import require_mask
from shell.errors import ConfigError, TrainingError, clipped, said
from shell.games import Bot, Opponent, RandomOpponent, Ratings, Seating, import_bots, named_opponent, snapshot_players
from shell.games.exploitability import Exploitability, measures_exploitability, policy_exploitability
from shell.inference import load_agent, require_env, resolve_checkpoint
from shell.installation import install_hint
from shell.seeding import eval_seeds, opening_seed, opponent_seed
from shell.stop import StopRequest
from shell.tracking import log_videos

__all__ = ["DEFAULT_EVAL_MAX_EPISODE_STEPS", "Bot", "EvalResult", "EvalSpec", "check_opponents", "eval_checkpoint",
           "eval_env_config", "eval_episode_cap", "eval_fields", "evaluate", "resolve_opponents"]

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
        ratings: turn-based games: every player's Elo rating (:class:`shell.games.Ratings`: ``"random"`` =
            0, the bots, ``"snapshot@<update>"`` for each snapshot, ``"policy"``); None otherwise.
        exploitability: OpenSpiel games with ``EvalSpec.exploitability``: the policy's exact NashConv and
            exploitability (:func:`shell.games.exploitability.policy_exploitability`); None otherwise.
        average_exploitability: the same figure of the run's average policy (``EvalSpec.average``); None otherwise.
        distinct_per_opponent: turn-based games: against each opponent of ``returns_per_opponent``, by seat, how many
            of the games differed (two games are the same when every move and every mover's observation are);
            None otherwise.
    """

    returns: list[float]
    truncated: int
    max_episode_steps: int
    returns_per_agent: list[float] | None = None
    returns_per_group: dict[str, list[float]] | None = None
    render_fps: int | None = None  # the env's frame rate (its metadata's render_fps), for videos
    returns_per_opponent: dict[str, dict[str, list[float]]] | None = None
    ratings: dict[str, float | None] | None = None
    exploitability: Exploitability | None = None
    average_exploitability: Exploitability | None = None
    distinct_per_opponent: dict[str, dict[str, int]] | None = None


@attrs.frozen
class EvalSpec:
    """What :func:`evaluate` plays: the env, how many episodes on which seeds, against whom.

    Attributes:
        env: the env config (evaluated on the env its backend names: :func:`eval_env_config`).
        episodes: the episodes, one env copy each (and, in a game, against each opponent).
        seed: the run's seed; episode i is seeded by ``seed_scheme`` (:func:`shell.seeding.eval_seeds`: a stream
            of its own, never a training one; with ``"offset"``, ``seed + 1,000,000 + i``).
        seed_scheme: ``run.seed_scheme``.
        policy: the run's policy config: shapes a multi-agent env's rows as in training (``policy.agent_id``,
            ``policy.critic``); None for the defaults.
        max_episode_steps: the step cap of an episode (``run.eval_max_episode_steps``; see
            :func:`eval_episode_cap` for the default).
        opponents: a turn-based game's opponents by name (``run.eval_opponents``: ``"random"`` or a bot
            ``"module:function"``).
        snapshots: a game's self-play snapshots by the update after which each was taken: opponents after the
            named ones, and rated players.
        first_episode: evaluate episodes from this index on (``eval --video`` replays episode i alone).
        source: a ``Callable[[], gymnasium.Env]`` that replaces the config's env id (runs trained from a factory).
        wrappers: gymnasium wrappers around each evaluation sub-env (what callbacks set).
        render_mode: the env's render mode (``"rgb_array"`` for videos).
        exploitability: measure the policy's exact exploitability too (an OpenSpiel game: ``run.exploitability``,
            :func:`shell.games.exploitability.measures_exploitability`), even with ``episodes = 0``.
        average: the run's average policy (``ppo.average_decay``), laid out as the agent: with ``exploitability``
            its figure is measured too (it plays no episode).
    """

    env: EnvConfig
    episodes: int
    seed: int
    seed_scheme: str = "spawn"
    policy: PolicyConfig | None = None
    max_episode_steps: int | None = None
    opponents: Sequence[str] = ("random",)
    snapshots: dict[int, torch.nn.Module] = attrs.field(factory=dict)
    first_episode: int = 0
    source: Callable[[], gym.Env] | None = None
    wrappers: list | None = None
    render_mode: str | None = None
    exploitability: bool = False
    average: torch.nn.Module | None = None
    opening_moves: int = 0

    @classmethod
    def of_run(cls, config: Config, **changes: Any) -> EvalSpec:
        """A run's evaluation as its config says (``run.eval_episodes``, its seeds, cap and opponents), with
        ``changes``; its exact exploitability as ``run.exploitability`` says, unless ``changes`` say."""
        run = config.run
        if "exploitability" not in changes:
            changes["exploitability"] = measures_exploitability(config)
        return cls(**{"env": config.env, "episodes": run.eval_episodes, "seed": run.seed,
                      "seed_scheme": run.seed_scheme, "policy": config.policy,
                      "max_episode_steps": run.eval_max_episode_steps, "opponents": tuple(run.eval_opponents),
                      "opening_moves": run.eval_opening_moves, **changes})


def check_opponents(config: Config, lanes: dict[Any, Any]) -> None:
    """Refuse ``run.eval_opponents`` bots and ``run.eval_opening_moves`` where the evaluation plays no opponent (an
    env that is not a turn-based game of Discrete moves, :meth:`shell.games.Ratings.serves`): they would be ignored.

    Raises:
        ConfigError: one line naming the key.
    """
    if Ratings.serves(lanes):
        return
    run = config.run
    if list(run.eval_opponents) != ["random"]:
        raise ConfigError(f"run.eval_opponents = {clipped(run.eval_opponents, 40)}: bots play turn-based games of "
                          f"Discrete moves only, and {clipped(config.env.id, 30)} is not one; leave the key out")
    if run.eval_opening_moves:
        raise ConfigError(f"run.eval_opening_moves = {run.eval_opening_moves}: openings are of turn-based games of "
                          f"Discrete moves only, and {clipped(config.env.id, 30)} is not one; set it to 0")


def resolve_opponents(names: Sequence[str]) -> dict[str, Bot | None]:
    """Each ``run.eval_opponents`` entry with its bot (None for ``"random"``), imported now
    (:func:`shell.games.import_bots`).

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


def evaluate(agent: torch.nn.Module, spec: EvalSpec, device: torch.device, stop: StopRequest | None = None,
             on_step: Callable[[], None] | None = None, frames: list | None = None,
             ratings: Ratings | None = None) -> EvalResult:
    """Play ``spec.episodes`` episodes with the deterministic policy (u = mean, or argmax), one loop for a run of one
    lane or several (each lane's rows acted on by its policy, ``agent.lanes()``); the agent is only read.

    An episode's return is the sum over its agents of each agent's return; a multi-agent env's result also has it per
    agent that took part (``returns_per_agent``) and, with several groups, per group (``returns_per_group``). Each
    copy's first episode counts; one still running after the cap (``spec.max_episode_steps``) ends there and counts
    as truncated.

    A turn-based game of Discrete moves is played against each opponent of ``spec.opponents`` in turn, then against
    each of ``spec.snapshots``, ``spec.episodes`` games each on the same seeds (:class:`shell.games.Seating`: the
    policy plays seat ``i % S`` of copy i). An episode's return is then the policy's own score (the game's rewards:
    +1 win, 0 draw, -1 loss in the classic games): ``returns`` are the scores against the first opponent,
    ``returns_per_opponent`` every opponent's by seat, and ``ratings`` every player's Elo rating
    (:meth:`shell.games.Ratings.rate`; ``ratings`` keeps the snapshots' games between evaluations of a run).

    Args:
        agent: the policy (one lane's :class:`shell.policies.ActorCritic`, or several lanes').
        spec: what to play (:class:`EvalSpec`).
        device: where the agent is.
        stop: polled once per env step.
        on_step: called after every joint step (the runner's fault-injection point).
        frames: with ``spec.render_mode = "rgb_array"``, receives the first copy's frames until its first episode
            ends (against the first opponent).
        ratings: the run's ratings (a new one when None).

    Raises:
        Interrupted: ``stop`` was requested.
        ConfigError: a missing package for rendering; a policy trained with masks on an env without them; an
            opponent that cannot be imported (:func:`resolve_opponents`); a policy of another number of lanes.
        TrainingError: a bot returned an illegal move; the env gave a non-finite reward.
    """
    env_cfg = eval_env_config(spec.env)
    if spec.episodes <= 0:
        if not spec.exploitability:
            return EvalResult([], 0, 0)
        env = make_lanes(env_cfg, device, num_envs=1, source=spec.source, policy=spec.policy)
        env.close()  # built only for its lanes' seats
        return EvalResult([], 0, 0, exploitability=_exploitability(agent, spec, env.lanes),
                          average_exploitability=_exploitability(spec.average, spec, env.lanes))
    bots = resolve_opponents(spec.opponents)
    env = make_lanes(env_cfg, device, num_envs=spec.episodes, render_mode=spec.render_mode, wrappers=spec.wrappers,
                     source=spec.source, policy=spec.policy)
    run = _Episodes(env, env_cfg, eval_episode_cap(env_cfg, spec.max_episode_steps, env.max_episode_steps), spec,
                    device, stop, on_step)
    ratings = ratings or Ratings(env.lanes, spec.seed, spec.seed_scheme)
    per_opponent, elo, distinct = None, None, None
    try:
        if ratings.rated:
            seating = Seating(env.lanes, env.copies, device)
            named = torch.Generator(device).manual_seed(opponent_seed(spec.seed, spec.seed_scheme))
            sides: list[Opponent] = [named_opponent(name, bot, named, "evaluation opponent")
                                     for name, bot in bots.items()]
            sides += [ratings.snapshot_opponent(u, player, device) for u, player in spec.snapshots.items()]
            games = [run.play(agent, seating, side, frames if k == 0 else None) for k, side in enumerate(sides)]
            per_opponent = {side.name: seating.by_seat(game[0]) for side, game in zip(sides, games, strict=True)}
            distinct = {side.name: {seat: len(set(keys)) for seat, keys in seating.by_seat(game[4]).items()}
                        for side, game in zip(sides, games, strict=True)}
            _warn_repeated(per_opponent, distinct)
            elo = ratings.rate({side.name: game[0] for side, game in zip(sides, games, strict=True)}, bots,
                               spec.snapshots, device,
                               lambda player, opponent, sampling: run.play(player, seating, opponent, None,
                                                                           sampling)[0])
            result = games[0]
        else:
            result = run.play(agent, None, None, frames)
    except gym.error.DependencyNotInstalled as exc:
        raise ConfigError(f"rendering {env_cfg.id} needs a missing package ({exc}); "
                          f"run: {install_hint('video')}") from None
    finally:
        env.close()
    returns, per_agent, per_group, truncated, _ = result
    several_agents = any(lane.agents is not None for lane in env.lanes.values())
    return EvalResult(returns, truncated, run.cap, per_agent if several_agents and per_opponent is None else None,
                      per_group if len(env.lanes) > 1 else None, env.render_fps, per_opponent, elo,
                      _exploitability(agent, spec, env.lanes), _exploitability(spec.average, spec, env.lanes),
                      distinct)


def _warn_repeated(per_opponent: dict[str, dict[str, list[float]]], distinct: dict[str, dict[str, int]]) -> None:
    """One line on stderr (once per process and opponent) where every game of a seat against an opponent was the
    same game: deterministic moves on both sides, so its count overstates what was measured."""
    for name, seats in distinct.items():
        for seat, count in seats.items():
            games = len(per_opponent[name][seat])
            message = (f"evaluation: the {games} games of seat {seat!r} against {name!r} were one game (deterministic "
                       "moves on both sides); set run.eval_opening_moves to vary them")
            if count == 1 and games > 1 and message not in _WARNED:
                _WARNED.add(message)
                print(f"warning: {message}", file=sys.stderr)


_WARNED: set[str] = set()


def _exploitability(agent: torch.nn.Module | None, spec: EvalSpec, lanes: dict[Any, Any]) -> Exploitability | None:
    """``agent``'s exact exploitability in the game of ``spec``, its seats by lane as ``lanes`` hold them (None
    without ``spec.exploitability`` or an agent)."""
    if not spec.exploitability or agent is None:
        return None
    return policy_exploitability(agent, spec.env, spec.policy, {g: list(lane.agents) for g, lane in lanes.items()})


@attrs.frozen
class _Episodes:
    """The episode loop of :func:`evaluate` on ``env`` (reset with the evaluation seeds before each set)."""

    env: Any
    env_cfg: EnvConfig
    cap: int
    spec: EvalSpec
    device: torch.device
    stop: StopRequest | None
    on_step: Callable[[], None] | None

    def play(self, agent: torch.nn.Module, seating: Seating | None, opponent: Opponent | None,
             frames: list | None = None, sampling: torch.Generator | None = None
             ) -> tuple[list[float], list[float], dict[Any, list[float]], int, list[int]]:
        """One episode per copy: each copy's return (in a game, the policy's score: ``seating``'s seat of it against
        ``opponent``), per agent, per group, how many were truncated, and (in a game) each copy's game as a key that
        two games share when every move and every mover's observation are the same (0 elsewhere). The agent plays
        its deterministic moves, or samples them from ``sampling`` where given (a snapshot's rating games); in a
        game the first ``spec.opening_moves`` moves of each copy are uniform-random legal moves of the opening
        stream (:func:`shell.seeding.opening_seed`, the same for every opponent)."""
        env, spec, device = self.env, self.spec, self.device
        specs = env.lanes
        E = env.copies
        returns: list[float | None] = [None] * E
        per_agent: list[float | None] = [None] * E
        per_group: dict[Any, list[float | None]] = {g: [None] * E for g in specs}
        truncated = 0
        games = seating is not None
        openings = RandomOpponent(torch.Generator(device).manual_seed(opening_seed(spec.seed, spec.seed_scheme))) \
            if games and spec.opening_moves > 0 else None
        moves = np.zeros(E, dtype=np.int64)  # the moves made in each copy's game
        keys, game_keys = [0] * E, [0] * E
        policies = _lane_policies(agent, specs)
        rows = env.reset(seed=eval_seeds(spec.seed, spec.seed_scheme, spec.episodes, spec.first_episode))
        ep_return = np.zeros(E)
        group_return = {g: np.zeros(E) for g in specs}
        ep_length = np.zeros(E, dtype=np.int64)
        took_part = _by_copy([rows[g].valid for g in specs], E)
        states = {g: policies[g].initial_state(lane.num_envs, device) for g, lane in specs.items()}
        starts = {g: torch.ones(lane.num_envs, dtype=torch.bool, device=device) for g, lane in specs.items()}
        if frames is not None:
            frames.append(env.render())
        first = next(iter(specs))
        with torch.inference_mode():
            while any(r is None for r in returns):
                if self.stop is not None:
                    self.stop.check()
                actions = {}
                for g in specs:
                    mask = rows[g].action_mask  # [N, A] bool where the env gives masks: never a masked action
                    require_mask(policies[g], mask, f"the evaluation env {self.env_cfg.id!r}", error=ConfigError)
                    actions[g], states[g] = policies[g].act_step(rows[g].obs, states[g], starts[g],
                                                                 deterministic=sampling is None, generator=sampling,
                                                                 action_mask=mask)
                    if seating is not None:
                        actions[g] = seating.actions(g, actions[g], rows[g], opponent)
                        if openings is not None and (moves < spec.opening_moves).any():
                            actions[g] = seating.opening(g, actions[g], rows[g], openings, moves < spec.opening_moves)
                        _game_keys(keys, g, rows[g], actions[g], specs[g].rows_per_copy)
                if games:
                    moves += _by_copy([rows[g].valid for g in specs], E).any(axis=1)
                results = env.step(actions)
                if self.on_step is not None:
                    self.on_step()
                for g, lane in specs.items():
                    reward = results[g].reward.cpu().numpy().reshape(E, lane.rows_per_copy).sum(axis=1)
                    if not np.isfinite(reward).all():  # a NaN return would be reported as a score (or break its std)
                        bad = reward[~np.isfinite(reward)][0]
                        raise TrainingError(f"env {self.env_cfg.id!r} gave a non-finite reward ({bad}) in an "
                                            "evaluation episode")
                    group_return[g] += reward
                    ep_return += reward if seating is None else seating.score(g, results[g].reward)
                ep_length += 1
                ended = results[first].ended.cpu().numpy()
                by_cap = ep_length >= self.cap
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
                        game_keys[i] = keys[i]
                done = ended | by_cap
                moves[done] = 0
                for i in np.flatnonzero(done):
                    keys[i] = 0
                ep_return[done] = 0.0
                for g in specs:
                    group_return[g][done] = 0.0
                ep_length[done] = 0
                now = _by_copy([results[g].valid for g in specs], E)
                took_part = np.where(done[:, None], now, took_part | now)
                starts = {g: (results[g].terminated | results[g].truncated) if results[g].episode_start is None
                          else results[g].episode_start for g in specs}
                rows = {g: Rows(results[g].obs, results[g].valid, results[g].action_mask) for g in specs}
        return returns, per_agent, per_group, truncated, game_keys


def _game_keys(keys: list[int], lane: Any, rows: Rows, actions: torch.Tensor, rows_per_copy: int) -> None:
    """Fold each move of ``lane`` (its rows to move: their observation and action) into its copy's key in
    ``keys`` (a hash, compared within one process only)."""
    valid = np.flatnonzero(rows.valid.cpu().numpy())
    if not len(valid):
        return
    parts = list(rows.obs.values()) if isinstance(rows.obs, dict) else [rows.obs]
    seen = [part.cpu().numpy().reshape(len(rows.valid), -1) for part in parts]
    moved = actions.cpu().numpy().reshape(len(rows.valid), -1)
    for r in valid.tolist():
        i = r // rows_per_copy
        keys[i] = hash((keys[i], lane, r % rows_per_copy, moved[r].tobytes(), *(x[r].tobytes() for x in seen)))


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
                    device: str = "cpu", stop: StopRequest | None = None, video_episodes: int = 1,
                    env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """The ``eval`` command (and :func:`shell.api.evaluate`): evaluate a checkpoint, write ``eval.json`` beside it,
    return the result.

    ``summary.json`` of the run is left alone. With ``video``, the first ``video_episodes`` evaluation
    episodes are played again, one at a time with the same seeds, and recorded as mp4s in ``videos/``
    beside the checkpoint (``<checkpoint>-episode-<i>.mp4``), through gymnasium's RecordVideo
    (rgb_array rendering); the result names them in ``videos``. A run tracked with W&B or MLflow
    (``run.loggers``) gets them too, in its tracker run (``videos_logged_to`` names the trackers).
    Episodes are capped at the run's ``run.eval_max_episode_steps`` (see :func:`evaluate`). ``env``, a factory of
    the run's env (``Callable[[], gymnasium.Env]``, or of its PettingZoo env), replaces the config's id: a run
    trained on a factory or a ready vector env needs it (its config cannot rebuild the env).

    Raises:
        ConfigError: a bad target, a corrupt checkpoint, a run trained on a factory or a ready
            vector env without ``env``, an ``env`` that is not a factory, a missing video extra, or
            ``video_episodes`` not in 1..``episodes``.
        Interrupted: ``stop`` was requested; eval.json is not written.
    """
    path = resolve_checkpoint(target)
    if video:
        if not 1 <= video_episodes <= episodes:
            raise ConfigError(f"{said('video_episodes', video_episodes)} must be from 1 to "
                              f"{said('episodes')} ({episodes}): the videos are of the first evaluation episodes")
        try:
            import moviepy  # noqa: F401 - save_video needs it
        except ImportError:
            raise ConfigError(f"{said('video')} needs moviepy; run: {install_hint('video')}") from None
    if env is not None and not callable(env):
        raise ConfigError(f"env must be a factory of the run's env (a Callable[[], gymnasium.Env], or of its "
                          f"PettingZoo env), not {type(env).__name__}")
    agent, config, state = load_agent(path, device, average=False)  # the last policy; the average beside it
    require_env(path, state, env, f"evaluate it from Python with a factory of its env: shell.evaluate("
                                  f"{str(target)!r}, env=<env factory>)")
    dev = next(agent.parameters()).device
    average = load_agent(path, dev, average=True)[0] if "average" in state else None  # ppo.average_decay's
    outcome = evaluate(agent, EvalSpec.of_run(config, episodes=episodes, source=env, average=average,
                                              snapshots=snapshot_players(agent, state.get("selfplay"))), dev, stop)
    result: dict[str, Any] = {
        "env_id": config.env.id,
        "seed": config.run.seed,
        "env_steps": state["env_steps"],
        **eval_fields(outcome),
        "checkpoint": str(path),
    }
    if video:
        videos = _record(agent, config, path, video_episodes, dev, stop, env)
        result.update(video_episodes=video_episodes, videos=videos)
        run_dir = path.parent.parent if path.parent.name == "checkpoints" else None
        if run_dir is not None and videos:  # a tracked run: the videos go to its W&B / MLflow run too
            result["videos_logged_to"] = log_videos(run_dir, config.run.loggers, [Path(v) for v in videos],
                                                    config.run.tracker_timeout)
    (path.parent / "eval.json").write_text(json.dumps(result, indent=2) + "\n")
    return result


def _record(agent: torch.nn.Module, config: Config, path: Path, video_episodes: int, device: torch.device,
            stop: StopRequest | None, source: Callable[[], Any] | None = None) -> list[str]:
    """``eval --video``: episode i replays evaluation episode i (its own seed) on one copy rendered as ``rgb_array``
    (a game's against ``"random"``),
    written by gymnasium's ``save_video`` (at the env's ``render_fps``) as ``videos/<checkpoint>-episode-<i>.mp4``.
    One at a time: a recording holds its frames in memory."""
    from gymnasium.utils.save_video import save_video

    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # rgb_array rendering needs no display
    folder = path.parent / "videos"
    videos = []
    for i in range(video_episodes):
        frames: list = []
        spec = EvalSpec.of_run(config, episodes=1, first_episode=i, render_mode="rgb_array", opponents=("random",),
                               source=source)
        outcome = evaluate(agent, spec, device, stop, frames=frames)
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
    ``loss`` rates, its ``games`` and how many of them were ``distinct`` (the rates and the ratings count every game:
    a deterministic policy against a deterministic bot plays one game however many it counts; see
    ``run.eval_opening_moves``); ``eval_return_mean`` is then the policy's mean score against the first
    opponent over both seats. It adds ``elo`` too: every player's Elo rating (``"random"`` = 0, see
    :class:`shell.games.Ratings`), the policy's under ``"policy"``. An OpenSpiel game whose exploitability was
    measured adds ``nash_conv`` and ``exploitability`` (``run.exploitability``), and of a run with an average policy
    ``average_nash_conv`` and ``average_exploitability``."""
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
            "eval_vs": {name: {seat: _outcomes(scores, (outcome.distinct_per_opponent or {}).get(name, {}).get(seat))
                               for seat, scores in seats.items()}
                        for name, seats in outcome.returns_per_opponent.items()}}),
        **({} if outcome.ratings is None else {"elo": outcome.ratings}),
        **_exploitability_fields("", outcome.exploitability),
        **_exploitability_fields("average_", outcome.average_exploitability),
    }


def _exploitability_fields(prefix: str, figure: Exploitability | None) -> dict[str, Any]:
    return {} if figure is None else {f"{prefix}nash_conv": figure.nash_conv,
                                      f"{prefix}exploitability": figure.exploitability}


def _outcomes(scores: list[float], distinct: int | None = None) -> dict[str, Any]:
    """A seat's games as win, draw and loss rates (by the sign of the policy's score), their count, and how many of
    them differed (``distinct``, where known)."""
    n = len(scores)
    rate = (lambda k: k / n) if n else (lambda k: None)
    return {"win": rate(sum(s > 0 for s in scores)), "draw": rate(sum(s == 0 for s in scores)),
            "loss": rate(sum(s < 0 for s in scores)), "games": n,
            **({} if distinct is None else {"distinct": distinct})}
