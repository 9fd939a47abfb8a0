"""Self-play's pool (``[selfplay]``; docs/concepts/design.md, "Games have one home"): it picks who plays each copy's
game; the opponents (:mod:`shell.games.opponents`) act in their rows inside :class:`PoolEnv`, as lanes that never learn.

A turn-based game whose seats share their spaces is one lane: every seat of every copy is a row of the one policy.
For each copy, game by game, :class:`OpponentPool` draws who plays the seats the learner does not:

- with probability ``selfplay.random_prob``, uniform-random legal moves (:data:`RANDOM`);
- with probability ``selfplay.bot_prob``, one of ``selfplay.bots`` drawn uniformly (:data:`BOT` ``- j``);
- otherwise, with probability ``selfplay.latest_prob``, the learner itself in every seat (:data:`LATEST`: plain
  self-play, every seat learns), else a snapshot drawn uniformly from the pool (LATEST when it holds none:
  ``snapshot_every = 0``).

The learner's seat moves on by one from game to game in each copy. With ``selfplay.opening_moves = k``, the first k
moves of every game, whoever plays it, are uniform-random legal moves that no seat learns from (random openings, as
game-playing programs use to cover the openings their own play never reaches); with ``selfplay.vary_openings`` each
game's opening is 0 to k moves long, drawn uniformly per game, so that the positions before the k-th move are met
too (an evaluation game starts from the empty board). Every ``snapshot_every`` updates the learner's weights join the
pool (the oldest leaves past ``pool_size``); the pool starts with the initial policy. The pool, and where its random
streams stand, is in every checkpoint.

:class:`PoolEnv` is the game as the learner's lane sees it: at each step the pool's opponents move in the rows they
play (and every row of a copy in its opening moves at random), and only the learner's rows are ``valid``. So no
opponent's move enters an update, a normaliser or an advantage (:func:`core.turn_gae` sees only the learner's
turns), and the rollout (:mod:`shell.rollout`) does not know that a pool exists.

Why uniform-random opponents: a policy that meets only itself (or its past selves) sees only the positions that
near-optimal play reaches, and never learns to punish a blunder; the random games put it in front of them. Why
random openings: the same policy opens its games the way it prefers, so as second mover it meets strong play only
after those openings; a perfect opponent that opens anywhere finds the openings it never learned to answer. Why
bots: a scripted player that punishes a blunder every time (one that takes every win it is left) teaches in few
games what a policy's own young self, which misses most of them, teaches slowly.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from shell.config import Config, SelfPlayConfig
from shell.envs.base import LaneEnv, LaneSpec, Rows, StepResult
from shell.errors import ConfigError, clipped
from shell.games.opponents import (
    Opponent,
    RandomOpponent,
    SnapshotOpponent,
    import_bots,
    named_opponent,
    play_rows,
    snapshot_name,
)
from shell.policies import ActorCritic
from shell.seeding import pool_seed

__all__ = ["BOT", "LATEST", "RANDOM", "OpponentPool", "PoolEnv", "check_selfplay", "snapshot_players"]

LATEST = -1
"""A copy's opponent when the learner plays every seat of it."""

RANDOM = -2
"""A copy's opponent when uniform-random legal moves play the seats the learner does not (``selfplay.random_prob``)."""

BOT = -3
"""A copy's opponent when bot ``j`` of ``selfplay.bots`` plays the seats the learner does not: ``BOT - j``."""


def check_selfplay(specs: dict[Any, LaneSpec], config: Config) -> None:
    """Refuse ``[selfplay]`` where a pool cannot play: the game must be one lane (seats that share their spaces),
    turn-based, with two seats or more, and the policy feed-forward; with ``selfplay.random_prob > 0``,
    ``selfplay.bot_prob > 0`` or ``selfplay.opening_moves > 0`` its actions one Discrete choice.

    Raises:
        ConfigError: one line naming what to use instead (the groups of a game whose seats differ in spaces, at
            most 200 characters).
    """
    cfg = config.selfplay
    if len(specs) > 1:
        groups = "; ".join(f"{g}: {', '.join(spec.agents)}" for g, spec in specs.items())
        raise ConfigError(f"[selfplay] needs one policy in every seat, and this game's seats differ in spaces "
                          f"({len(specs)} groups: {clipped(groups, 60)}); train without [selfplay] (each group learns)")
    spec = next(iter(specs.values()))
    if not spec.turns or not spec.agents or len(spec.agents) < 2:
        raise ConfigError("[selfplay] serves turn-based games of two seats or more (env.backend = \"pettingzoo\" "
                          "with an AEC game); for this env set selfplay.snapshot_every, random_prob, bot_prob and "
                          "opening_moves to 0 and selfplay.bots to []")
    if config.policy.recurrent != "none":
        raise ConfigError("[selfplay] plays snapshots of feed-forward policies; use policy.recurrent = \"none\"")
    uniform = cfg.random_prob > 0 or cfg.opening_moves > 0 or cfg.bot_prob > 0
    if uniform and not isinstance(spec.action_space, gym.spaces.Discrete):
        raise ConfigError(f"selfplay.random_prob, bot_prob and opening_moves play moves of a Discrete action "
                          f"space, and this game's is {spec.action_space}; set them to 0")


def snapshot_players(agent: torch.nn.Module, state: dict[str, Any] | None) -> dict[int, ActorCritic]:
    """The snapshots of a checkpoint's pool (its ``"selfplay"`` entry, :meth:`OpponentPool.state_dict`) by the
    update after which each was taken, built as copies of ``agent``'s one lane; empty without a pool."""
    if not state:
        return {}
    lane = next(iter(agent.lanes().values()))
    return {int(update): _frozen(lane, weights) for update, weights in zip(state["taken_at"], state["snapshots"],
                                                                           strict=True)}


def _frozen(agent: torch.nn.Module, weights: dict[str, Any] | None = None) -> ActorCritic:
    """A copy of ``agent`` in eval mode that never trains, with ``weights`` loaded where given."""
    player = copy.deepcopy(agent).eval().requires_grad_(False)
    if weights is not None:
        player.load_state_dict(weights)
    return player


class OpponentPool:
    """Who plays each copy's game of one turn-based lane (see the module doc); it picks, the opponents act.

    Args:
        agent: the learner (read at :meth:`snapshot`, never changed).
        cfg: the ``[selfplay]`` section.
        seats: the S seats of a copy, in row order.
        copies: the E copies; the lane's rows are ``E * S``, copy-major.
        seed: the pool's seed (:func:`shell.seeding.pool_seed`): its draws of opponents and opening lengths, and
            one stream shared by every opponent it seats (random moves, openings, the snapshots' sampled moves).
        device: where the rows are.

    Attributes:
        snapshots: the pool's players, oldest first: :class:`SnapshotOpponent` s around frozen copies of the learner.
        taken_at: the update after which each snapshot was taken (0: the initial policy).
        bots: ``selfplay.bots``' opponents, in order (``"random"`` a :class:`RandomOpponent`).
        random: the uniform-random opponent (``selfplay.random_prob`` and the openings).
        opponent: ``[E]`` each copy's opponent in its current game (an index of :attr:`snapshots`, :data:`LATEST`,
            :data:`RANDOM` or ``BOT - j``).
        learner_seat: ``[E]`` the seat the learner plays in each copy (every seat where the opponent is LATEST).
        moves: ``[E]`` the moves made so far in each copy's game (the first ``opening_length`` are at random).
        opening_length: ``[E]`` how many random moves open each copy's game: ``opening_moves``, or with
            ``selfplay.vary_openings`` a uniform draw from 0 to ``opening_moves`` per game.

    Raises:
        ConfigError: a bot of ``selfplay.bots`` that cannot be imported.
    """

    def __init__(self, agent: ActorCritic, cfg: SelfPlayConfig, seats: list[str], copies: int, seed: int,
                 device: torch.device):
        self.agent, self.cfg, self.seats, self.copies, self.device = agent, cfg, list(seats), copies, device
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device).manual_seed(seed)
        self.random = RandomOpponent(self.generator)
        self.bots: list[Opponent] = [named_opponent(name, bot, self.generator, "training opponent")
                                     for name, bot in import_bots(cfg.bots, "selfplay.bots").items()]
        self.snapshots: list[SnapshotOpponent] = []
        self.taken_at: list[int] = []
        if cfg.snapshot_every > 0:
            self.snapshot(0)
        self.learner_seat = np.arange(copies) % len(self.seats)
        self.opponent = np.full(copies, LATEST)
        self.moves = np.zeros(copies, dtype=np.int64)
        self.opening_length = np.full(copies, cfg.opening_moves, dtype=np.int64)
        self._restored = False  # a checkpoint's draws wait for the reset that resumes the run
        self.learner_moves = 0  # the learner's moves since the last take_learner_moves()
        self.restart()

    @classmethod
    def for_run(cls, env: LaneEnv, agent: ActorCritic, config: Config, rank: int,
                device: torch.device) -> OpponentPool:
        """The pool of a run's one turn-based lane (checked by :func:`check_selfplay` first), seeded for ``rank``."""
        (spec,) = env.lanes.values()
        return cls(agent, config.selfplay, spec.agents, env.copies,
                   pool_seed(config.run.seed, config.run.seed_scheme, rank), device)

    # ------------------------------------------------------------------ the pool
    def snapshot(self, update: int) -> None:
        """Add the learner's current weights (and observation statistics) to the pool."""
        self.snapshots.append(SnapshotOpponent(snapshot_name(update), _frozen(self.agent), self.generator))
        self.taken_at.append(update)
        if len(self.snapshots) > self.cfg.pool_size:
            self.snapshots.pop(0)
            self.taken_at.pop(0)
            # indices move down by one; a game against the snapshot that left goes on against the next oldest
            self.opponent = np.where(self.opponent > 0, self.opponent - 1, self.opponent)

    def after_update(self, update: int) -> None:
        """Take a snapshot every ``snapshot_every`` updates."""
        if self.cfg.snapshot_every > 0 and update % self.cfg.snapshot_every == 0:
            self.snapshot(update)

    def take_learner_moves(self) -> int:
        """How many moves the learner made (and learns from) since the last call."""
        moves, self.learner_moves = self.learner_moves, 0
        return moves

    def players(self) -> dict[int, ActorCritic]:
        """The snapshots' policies by the update after which each was taken (the evaluation's opponents and rated
        players)."""
        return {update: opponent.player for update, opponent in zip(self.taken_at, self.snapshots, strict=True)}

    def seated(self, key: int) -> Opponent:
        """The opponent of a copy whose :attr:`opponent` is ``key`` (not :data:`LATEST`)."""
        if key == RANDOM:
            return self.random
        if key <= BOT:
            return self.bots[BOT - key]
        return self.snapshots[key]

    # ------------------------------------------------------------------ the games
    def _draw(self, n: int) -> np.ndarray:
        """``[n]`` opponents for new games (see the module doc). Each draw is made only when its chance is above 0,
        so that a pool without random moves or bots repeats its games."""
        cfg = self.cfg
        u = self.rng.random(n) if cfg.random_prob > 0 or cfg.bot_prob > 0 else None
        if self.snapshots:
            latest = self.rng.random(n) < cfg.latest_prob
            drawn = np.where(latest, LATEST, self.rng.integers(0, len(self.snapshots), n))
        else:
            drawn = np.full(n, LATEST)
        if u is None:
            return drawn
        if cfg.bot_prob > 0:
            at_bot = (u >= cfg.random_prob) & (u < cfg.random_prob + cfg.bot_prob)
            drawn = np.where(at_bot, BOT - self.rng.integers(0, len(self.bots), n), drawn)
        return np.where(u < cfg.random_prob, RANDOM, drawn)

    def restart(self) -> None:
        """The envs were reset: every copy starts a new game, against the opponent (and with the opening) drawn for
        it. After :meth:`load_state_dict` those are the checkpoint's, drawn when the copy's last game ended, so a
        resumed run draws nothing twice; otherwise every copy draws now."""
        self.moves = np.zeros(self.copies, dtype=np.int64)
        if self._restored:
            self._restored = False
            return
        self.opponent = self._draw(self.copies)
        if self.cfg.vary_openings:
            self.opening_length = self.rng.integers(0, self.cfg.opening_moves + 1, self.copies)

    def games_ended(self, ended: torch.Tensor) -> None:
        """``ended [E]`` bool, after each move: those copies start a new game: the learner moves to the next seat,
        and a new opponent is drawn; the others count one more move."""
        done = ended.cpu().numpy().astype(bool)
        self.moves = np.where(done, 0, self.moves + 1)
        if done.any():
            self.learner_seat[done] = (self.learner_seat[done] + 1) % len(self.seats)
            self.opponent[done] = self._draw(int(done.sum()))
            if self.cfg.vary_openings:
                self.opening_length[done] = self.rng.integers(0, self.cfg.opening_moves + 1, int(done.sum()))

    def in_opening(self) -> np.ndarray:
        """``[E]`` bool: the copies whose game is still in its random opening."""
        return self.moves < self.opening_length

    def learner_rows(self) -> np.ndarray:
        """``[E * S]`` bool: the rows the learner plays (and learns from): none during an opening."""
        seat = np.arange(len(self.seats))[None, :]
        mine = (self.opponent[:, None] == LATEST) | (seat == self.learner_seat[:, None])
        return (mine & ~self.in_opening()[:, None]).reshape(-1)

    def moves_in(self, rows: Rows, actions: torch.Tensor) -> torch.Tensor:
        """``actions`` (the learner's, ``[E * S]`` or ``[E * S, K]``) with each seated opponent's moves in the rows
        it plays, in the order of their keys (bots, random, snapshots), then uniform-random legal moves in every row
        of the copies still in their opening.

        Raises:
            TrainingError: a bot returned an illegal move, naming it and the move.
        """
        S = len(self.seats)
        self.learner_moves += int((self.learner_rows() & rows.valid.cpu().numpy()).sum())
        space = self.agent.action_space
        n, start = (int(space.n), int(space.start)) if isinstance(space, gym.spaces.Discrete) else (0, 0)
        owner = np.repeat(self.opponent, S)
        opening = np.repeat(self.in_opening(), S)
        theirs = ~(self.learner_rows() | opening)  # an opening's rows: at random below
        out = actions
        for key in np.unique(owner[theirs]).tolist():
            mine = torch.as_tensor((owner == key) & theirs, device=actions.device)
            out = play_rows(out, self.seated(key), rows, mine, n, start)
        if opening.any():  # whoever plays these copies, their moves are at random
            out = play_rows(out, self.random, rows, torch.as_tensor(opening, device=actions.device), n, start)
        return out

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The snapshots' weights, when each was taken, each copy's game (its learner's seat, opponent and opening
        length), and the random streams."""
        return {"snapshots": [opponent.player.state_dict() for opponent in self.snapshots],
                "taken_at": list(self.taken_at), "learner_seat": self.learner_seat.tolist(),
                "opponent": self.opponent.tolist(), "opening_length": self.opening_length.tolist(),
                "rng": self.rng.bit_generator.state, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`state_dict`; the reset that resumes the run starts every copy's new game against the
        opponent restored for it (:meth:`restart`). A checkpoint written before the opening lengths were saved
        (6ee7eb4 and earlier) keeps ``selfplay.opening_moves`` for each.

        Raises:
            ConfigError: a checkpoint without a pool (written without [selfplay]).
        """
        if state is None:
            raise ConfigError("the checkpoint holds no self-play pool: it was written without [selfplay]")
        self.taken_at = [int(u) for u in state["taken_at"]]
        self.snapshots = [SnapshotOpponent(snapshot_name(u), _frozen(self.agent, weights), self.generator)
                          for u, weights in zip(self.taken_at, state["snapshots"], strict=True)]
        self.learner_seat = np.asarray(state["learner_seat"], dtype=np.int64)
        self.opponent = np.asarray(state["opponent"], dtype=np.int64)
        self.opening_length = np.asarray(state.get("opening_length", [self.cfg.opening_moves] * self.copies),
                                         dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])
        self._restored = True


class PoolEnv:
    """A turn-based lane env as the learner sees it under ``[selfplay]`` (see the module doc): the pool's opponents
    move in their rows inside :meth:`step`, and the rows it returns are ``valid`` only where the learner is to move.
    Everything else is the wrapped env's (:class:`shell.envs.base.LaneEnv`).

    Args:
        env: the game's lane env (one lane).
        pool: who plays each copy.
    """

    def __init__(self, env: LaneEnv, pool: OpponentPool):
        self.env, self.pool = env, pool
        self.lanes, self.copies, self.device = env.lanes, env.copies, env.device
        self.max_episode_steps, self.render_fps = env.max_episode_steps, env.render_fps
        (self._lane,) = env.lanes
        self._rows: Rows | None = None  # the env's rows (every seat to move), for the opponents

    def _learners(self, rows: Rows) -> Rows:
        """``rows`` with ``valid`` where the learner is to move."""
        return rows._replace(valid=rows.valid & torch.as_tensor(self.pool.learner_rows(), device=rows.valid.device))

    def reset(self, seed: Any = None) -> dict[Any, Rows]:
        """Reset the env; every copy draws its opponent for a new game."""
        self._rows = self.env.reset(seed=seed)[self._lane]
        self.pool.restart()
        return {self._lane: self._learners(self._rows)}

    def step(self, actions: dict[Any, torch.Tensor]) -> dict[Any, StepResult]:
        """Step with the learner's ``actions`` in its rows and the opponents' moves in theirs; the copies whose game
        ended draw their next opponent."""
        moves = self.pool.moves_in(self._rows, actions[self._lane])
        step = self.env.step({self._lane: moves})[self._lane]
        self.pool.games_ended(step.ended)
        self._rows = Rows(step.obs, step.valid, step.action_mask)
        return {self._lane: step._replace(valid=self._learners(self._rows).valid)}

    def mask_sources(self) -> dict[Any, str | None]:
        return self.env.mask_sources()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        return self.env.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> Any:
        return self.env.get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        self.env.set_attr(name, values)
