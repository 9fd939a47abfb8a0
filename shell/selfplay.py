"""Self-play against a pool of past snapshots, uniform-random moves and bots (``[selfplay]``; DESIGN.md, "Turns"):
opponents that act and never learn.

A turn-based game whose seats share their spaces is one lane: every seat of every copy is a row of the one policy.
With ``selfplay.snapshot_every > 0``, a :class:`SnapshotPool` decides for each copy, game by game, who plays it:
with probability ``selfplay.latest_prob`` the learner plays every seat (plain self-play, every seat learns);
otherwise the learner plays one seat and a snapshot drawn uniformly from the pool plays the others. With
``selfplay.random_prob > 0`` a game is first, with that probability, against uniform-random legal moves (the learner
plays one seat; :data:`RANDOM`), with ``selfplay.bot_prob > 0`` against one of ``selfplay.bots`` (functions of the
observation and mask, as ``run.eval_opponents`` takes them; :data:`BOT`), and only the other games draw as above; with
``snapshot_every = 0`` the pool holds no snapshots and those games are plain self-play. The learner's seat moves on by
one from game to game in each copy.
With ``selfplay.opening_moves = k``, the first k moves of every game, whoever plays it, are uniform-random legal
moves that no seat learns from (random openings, as game-playing programs use to cover the openings their own play
never reaches); with ``selfplay.vary_openings`` each game's opening is 0 to k moves long, drawn uniformly per game,
so that the positions before the k-th move are met too (an evaluation game starts from the empty board). An
opponent's rows are acted on by the opponent (a snapshot samples its policy under the row's mask, with its own
observation statistics) and are not ``valid`` for the learner, so they enter no update, no normaliser
and no advantage (:func:`core.turn_gae` sees only the learner's turns). Every ``snapshot_every`` updates the
learner's weights join the pool (the oldest leaves past ``pool_size``); the pool starts with the initial policy. The
pool, and where its random streams stand, is in every checkpoint.

Why uniform-random opponents: a policy that meets only itself (or its past selves) sees only the positions that
near-optimal play reaches, and never learns to punish a blunder; the random games put it in front of them. Why
random openings: the same policy opens its games the way it prefers, so as second mover it meets strong play only
after those openings; a perfect opponent that opens anywhere finds the openings it never learned to answer. Why
bots: a scripted player that punishes a blunder every time (one that takes every win it is left) teaches in few
games what a policy's own young self, which misses most of them, teaches slowly.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from shell.config import SelfPlayConfig
from shell.envs import import_object
from shell.errors import ConfigError, TrainingError
from shell.observations import map_obs
from shell.policies import ActorCritic

__all__ = ["BOT", "LATEST", "RANDOM", "Bot", "SnapshotPool", "bot_move", "check_selfplay", "import_bots",
           "snapshot_name", "snapshot_players"]

LATEST = -1
"""A copy's opponent when the learner plays every seat of it."""

RANDOM = -2
"""A copy's opponent when uniform-random legal moves play the seats the learner does not (``selfplay.random_prob``)."""

BOT = -3
"""A copy's opponent when bot ``j`` of ``selfplay.bots`` plays the seats the learner does not: ``BOT - j``."""

Bot = Callable[[Any, np.ndarray], Any]
"""A bot of ``run.eval_opponents`` or ``selfplay.bots``: ``bot(observation, action_mask) -> action``. ``observation``
is the seat's observation as the policy sees it (NumPy; a Dict observation as a dict of arrays, without its
``action_mask`` key, an image or a Box flattened as the row holds it, e.g. tic-tac-toe's 3x3x2 planes as ``[18]``),
``action_mask`` ``[A]`` bool (all true for a game without masks); the action an int in ``[0, A)``."""


def import_bots(names: Sequence[str], key: str) -> dict[str, Bot | None]:
    """Each entry of the config list ``key`` (``run.eval_opponents``, ``selfplay.bots``) with its bot (None for
    ``"random"``), imported now.

    Raises:
        ConfigError: one line, an entry that cannot be imported or is not callable.
    """
    bots: dict[str, Bot | None] = {}
    for name in names:
        bot = None if name == "random" else import_object(name, f"{key} entry {name!r}")
        if bot is not None and not callable(bot):
            raise ConfigError(f"{key} entry {name!r} is an object of type {type(bot).__name__}, not a function of "
                              "(observation, action_mask)")
        bots[name] = bot
    return bots


def bot_move(role: str, name: str, bot: Bot, obs: Any, row: int, legal: np.ndarray) -> int:
    """The move of ``bot`` in row ``row`` of the rows' observation ``obs`` (``[N, ...]`` tensors, or a dict of
    them), whose legal moves are ``legal [A]`` bool.

    Raises:
        TrainingError: the bot returned an illegal move (or no integer), or raised, naming the ``role``
            (``"evaluation opponent"``, ``"training opponent"``), the bot and the move (or the exception).
    """
    try:
        move = bot(map_obs(lambda x: x[row].cpu().numpy(), obs), legal.copy())
    except Exception as exc:  # the bot's own fault: one line naming it, as for an illegal move
        detail = " ".join(str(exc).split())[:200]
        raise TrainingError(f"{role} {name!r} raised {type(exc).__name__}: {detail}") from exc
    try:
        index = operator.index(move.item() if isinstance(move, np.ndarray | torch.Tensor) else move)
    except (TypeError, ValueError):
        index = None
    if index is None or not 0 <= index < len(legal) or not legal[index]:
        raise TrainingError(f"{role} {name!r} played the illegal move {move!r}; the legal moves were "
                            f"{np.flatnonzero(legal).tolist()}")
    return index


def snapshot_name(update: int) -> str:
    """A snapshot's name in evaluations and ratings: ``"snapshot@<update>"``, the update after which it was taken
    (0: the initial policy)."""
    return f"snapshot@{update}"


def snapshot_players(agent: torch.nn.Module, state: dict[str, Any] | None) -> dict[int, ActorCritic]:
    """The snapshots of a checkpoint's pool (its ``"selfplay"`` entry, :meth:`SnapshotPool.state_dict`) by the
    update after which each was taken, built as copies of ``agent``'s one lane; empty without a pool."""
    if not state:
        return {}
    lane = next(iter(agent.lanes().values()))
    players = {}
    for update, weights in zip(state["taken_at"], state["snapshots"], strict=True):
        player = copy.deepcopy(lane).eval().requires_grad_(False)
        player.load_state_dict(weights)
        players[int(update)] = player
    return players


def check_selfplay(specs: dict, recurrent: bool, uniform: bool = False) -> None:
    """Refuse ``[selfplay]`` where a pool cannot play: the game must be one lane (seats that share their spaces),
    turn-based, with two seats or more, and the policy feed-forward; with ``uniform`` (``selfplay.random_prob >
    0``, ``selfplay.bot_prob > 0`` or ``selfplay.opening_moves > 0``) its actions one Discrete choice.

    Raises:
        ConfigError: one line naming what to use instead (the groups of a game whose seats differ in spaces).
    """
    if len(specs) > 1:
        groups = {g: spec.agents for g, spec in specs.items()}
        raise ConfigError(f"[selfplay] needs one policy for every seat, and this game's seats differ in spaces: they "
                          f"form the groups {groups}; train them as these groups (each learns) without [selfplay]")
    spec = next(iter(specs.values()))
    if not spec.turns or not spec.agents or len(spec.agents) < 2:
        raise ConfigError("[selfplay] serves turn-based games of two seats or more (env.backend = \"pettingzoo\" "
                          "with an AEC game); for this env set selfplay.snapshot_every, random_prob, bot_prob and "
                          "opening_moves to 0 and selfplay.bots to []")
    if recurrent:
        raise ConfigError("[selfplay] plays snapshots of feed-forward policies; use policy.recurrent = \"none\"")
    if uniform and not isinstance(spec.action_space, gym.spaces.Discrete):
        raise ConfigError(f"selfplay.random_prob, bot_prob and opening_moves play moves of a Discrete action "
                          f"space, and this game's is {spec.action_space}; set them to 0")


class SnapshotPool:
    """The opponents of one turn-based lane (see the module doc).

    Args:
        agent: the learner (read at :meth:`snapshot`, never changed).
        cfg: the ``[selfplay]`` section.
        seats: the S seats of a copy, in row order.
        copies: the E copies; the lane's rows are ``E * S``, copy-major.
        seed: the pool's seed (:func:`shell.seeding.pool_seed`).
        device: where the rows are.

    Attributes:
        snapshots: the pool's players, oldest first: copies of the learner, frozen, in eval mode.
        taken_at: the update after which each snapshot was taken (0: the initial policy).
        opponent: ``[E]`` each copy's opponent in its current game (an index of :attr:`snapshots`, or
            :data:`LATEST`).
        learner_seat: ``[E]`` the seat the learner plays in each copy (every seat where the opponent is LATEST).
        moves: ``[E]`` the moves made so far in each copy's game (the first ``opening_moves`` are at random).
        opening_length: ``[E]`` how many random moves open each copy's game: ``opening_moves``, or with
            ``selfplay.vary_openings`` a uniform draw from 0 to ``opening_moves`` per game.
    """

    def __init__(self, agent: ActorCritic, cfg: SelfPlayConfig, seats: list[str], copies: int, seed: int,
                 device: torch.device):
        self.agent, self.cfg, self.seats, self.copies, self.device = agent, cfg, list(seats), copies, device
        #: ``selfplay.bots`` by name (None: ``"random"``), imported now: one that cannot be is refused before training
        self.bots = list(import_bots(cfg.bots, "selfplay.bots").items())
        self.rng = np.random.default_rng(seed)
        self.generator = torch.Generator(device).manual_seed(seed)
        self.snapshots: list[ActorCritic] = []
        self.taken_at: list[int] = []
        if cfg.snapshot_every > 0:
            self.snapshot(0)
        self.learner_seat = np.arange(copies) % len(self.seats)
        self.opponent = np.full(copies, LATEST)
        self.moves = np.zeros(copies, dtype=np.int64)
        self.opening_length = np.full(copies, cfg.opening_moves, dtype=np.int64)
        self.restart()

    # ------------------------------------------------------------------ the pool
    def snapshot(self, update: int) -> None:
        """Add the learner's current weights (and observation statistics) to the pool."""
        player = copy.deepcopy(self.agent).eval().requires_grad_(False)
        self.snapshots.append(player)
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

    def players(self) -> dict[int, ActorCritic]:
        """The snapshots by the update after which each was taken (the evaluation's opponents and rated players)."""
        return dict(zip(self.taken_at, self.snapshots, strict=True))

    # ------------------------------------------------------------------ the games
    def _draw(self, n: int) -> np.ndarray:
        """``[n]`` opponents for new games: RANDOM with ``random_prob``, a bot (``BOT - j``, ``j`` uniform over
        ``selfplay.bots``) with ``bot_prob``, else LATEST with ``latest_prob`` or a snapshot, uniformly (LATEST when
        the pool holds none). Each draw is made only when its chance is above 0, so that a pool without random
        moves or bots repeats its games."""
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
        """The envs were reset: every copy draws its opponent for its new game."""
        self.opponent = self._draw(self.copies)
        self.moves = np.zeros(self.copies, dtype=np.int64)
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

    @property
    def learner_rows(self) -> torch.Tensor:
        """``[E * S]`` bool: the rows the learner plays (and learns from): none during an opening."""
        S = len(self.seats)
        seat = np.arange(S)[None, :]
        mine = (self.opponent[:, None] == LATEST) | (seat == self.learner_seat[:, None])
        mine &= self._past_opening()[:, None]
        return torch.as_tensor(mine.reshape(-1), device=self.device)

    def act(self, obs: Any, actions: torch.Tensor, mask: torch.Tensor | None,
            valid: torch.Tensor | None = None) -> torch.Tensor:
        """``[E * S]`` (``[E * S, K]`` for K-part moves) the learner's ``actions`` in its rows, each snapshot's
        sampled move in the rows it plays (under ``mask [E * S, A]``), a bot's move in the rows it plays that are
        to move (``valid [E * S]``; a bot is called once per move), uniform-random legal moves in the copies still
        in their opening.

        Raises:
            TrainingError: a bot returned an illegal move, naming it and the move.
        """
        S = len(self.seats)
        rows_of = np.repeat(self.opponent, S)
        opening = ~self._past_opening()
        learner = self.learner_rows.cpu().numpy() | np.repeat(opening, S)  # an opening's rows: at random below
        out = actions
        for k in np.unique(rows_of[~learner]):
            if k == RANDOM:
                theirs = self._uniform(actions, mask)
            elif k <= BOT:
                theirs = self._bot(BOT - int(k), obs, actions, mask, (rows_of == k) & ~learner, valid)
            else:
                player = self.snapshots[int(k)]
                theirs = player.act(obs, deterministic=False, generator=self.generator, action_mask=mask)
            rows = torch.as_tensor((rows_of == k) & ~learner, device=actions.device)
            rows = rows.view(-1, *[1] * (actions.dim() - 1))  # over each row's components ([E * S, K] actions)
            out = torch.where(rows, theirs.to(actions.dtype), out)
        if opening.any():  # whoever plays these copies, their moves are at random
            rows = torch.as_tensor(np.repeat(opening, S), device=actions.device)
            out = torch.where(rows, self._uniform(actions, mask).to(actions.dtype), out)
        return out

    def _bot(self, j: int, obs: Any, actions: torch.Tensor, mask: torch.Tensor | None, rows: np.ndarray,
             valid: torch.Tensor | None) -> torch.Tensor:
        """``[E * S]`` bot ``j``'s moves in ``rows [E * S]`` that are to move (``valid``; all of them when None),
        uniform-random legal moves for ``"random"``; the other rows' entries are never sent."""
        name, bot = self.bots[j]
        if bot is None:
            return self._uniform(actions, mask)
        out = torch.zeros(actions.shape[0], dtype=torch.long)
        n = int(self.agent.action_space.n)
        legal_rows = None if mask is None else mask.bool().cpu().numpy()
        to_move = rows if valid is None else rows & valid.cpu().numpy()
        for i in np.flatnonzero(to_move).tolist():
            legal = np.ones(n, dtype=bool) if legal_rows is None else legal_rows[i]
            out[i] = bot_move("training opponent", name, bot, obs, i, legal)
        return out.to(actions.device)

    def _past_opening(self) -> np.ndarray:
        """``[E]`` bool: the copies whose game is past its random opening (``opening_moves`` moves, or with
        ``vary_openings`` its own length)."""
        return self.moves >= self.opening_length

    def _uniform(self, actions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """``[E * S]`` a uniform draw among each row's legal actions (``mask [E * S, A]``; None: all legal)."""
        legal = torch.ones(actions.shape[0], int(self.agent.action_space.n), dtype=torch.bool, device=actions.device)
        if mask is not None:
            legal = torch.where(mask.any(dim=1, keepdim=True), mask.bool(), legal)  # a row with none: ignored anyway
        return torch.multinomial(legal.float(), 1, generator=self.generator).squeeze(1)

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """The snapshots' weights, when each was taken, each copy's game, and the random streams."""
        return {"snapshots": [player.state_dict() for player in self.snapshots], "taken_at": list(self.taken_at),
                "learner_seat": self.learner_seat.tolist(), "opponent": self.opponent.tolist(),
                "rng": self.rng.bit_generator.state, "generator": self.generator.get_state()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict` (a resumed run: the envs reset, so every copy draws a new game).

        Raises:
            ConfigError: a checkpoint without a pool (written without [selfplay]).
        """
        if state is None:
            raise ConfigError("the checkpoint holds no self-play pool: it was written without [selfplay]")
        self.snapshots = []
        for weights in state["snapshots"]:
            player = copy.deepcopy(self.agent).eval().requires_grad_(False)
            player.load_state_dict(weights)
            self.snapshots.append(player)
        self.taken_at = list(state["taken_at"])
        self.learner_seat = np.asarray(state["learner_seat"], dtype=np.int64)
        self.opponent = np.asarray(state["opponent"], dtype=np.int64)
        self.rng.bit_generator.state = state["rng"]
        self.generator.set_state(state["generator"])
