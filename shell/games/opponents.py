"""The opponents of a turn-based game: one interface, one class per kind (docs/concepts/design.md,
"Games have one home").

An :class:`Opponent` moves in its rows of a lane, given the rows' observations and legal moves: training's pool
(:class:`shell.games.pool.OpponentPool`), the evaluation (:func:`shell.evaluation.evaluate`) and the rating games
(:class:`shell.games.ratings.Ratings`) hold these same objects. There are three kinds:

- :class:`RandomOpponent` (``"random"``): a uniform draw among each row's legal moves;
- :class:`BotOpponent`: a user's function of ``(observation, action_mask)`` (:data:`Bot`), called once per move;
- :class:`SnapshotOpponent`: a frozen copy of a policy, sampling its moves as in training.

An opponent never learns: it reads the rows and returns moves, and nothing it plays enters an update, a normaliser
or an advantage. Each draws its random moves from the generator it is given, so the caller decides which stream
each opponent shares (training's pool: one for all of them; the evaluation: one per opponent).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from shell.envs import import_object
from shell.envs.base import Rows
from shell.errors import ConfigError, TrainingError
from shell.observations import map_obs

__all__ = ["Bot", "BotOpponent", "Opponent", "RandomOpponent", "SnapshotOpponent", "bot_move", "import_bots",
           "named_opponent", "play_rows", "snapshot_name"]

Bot = Callable[[Any, np.ndarray], Any]
"""A bot of ``run.eval_opponents`` or ``selfplay.bots``: ``bot(observation, action_mask) -> action``. ``observation``
is the seat's observation as the policy sees it (NumPy; a Dict observation as a dict of arrays, without its
``action_mask`` key, an image or a Box flattened as the row holds it, e.g. tic-tac-toe's 3x3x2 planes as ``[18]``),
``action_mask`` ``[A]`` bool (all true for a game without masks); the action an int in ``[0, A)``, the index of
its move (the library adds the space's ``start`` of a ``Discrete(A, start)`` game, as for the policy's moves)."""

RANDOM_NAME = "random"
"""The name of the uniform-random player in the config's lists and in the ratings."""


class Opponent:
    """A player of some rows of a turn-based lane that never learns.

    Attributes:
        name: its name in evaluations and ratings (``"random"``, ``"module:function"``, ``"snapshot@<update>"``).
    """

    name: str

    def act(self, rows: Rows, mine: torch.Tensor, num_actions: int, start: int = 0) -> torch.Tensor:
        """``[N]`` long: the opponent's moves in ``mine [N]`` bool, the rows it plays (it is called on to move in
        those of them that are ``rows.valid``), as the env takes them (a move's index plus ``start``, as the
        policy's); the entries of other rows are ignored by the caller.

        Args:
            rows: the lane's rows as the env gives them (:class:`shell.envs.Rows`: ``obs`` raw ``[N, ...]``, ``valid``
                ``[N]`` bool every row to move, ``action_mask`` ``[N, A]`` bool or None).
            mine: ``[N]`` bool on the rows' device.
            num_actions: the lane's Discrete action count A (every move is legal where ``action_mask`` is None).
            start: the first move of the lane's ``Discrete(A, start)`` space (0 for most games).
        """
        raise NotImplementedError


def legal_moves(rows: Rows, num_actions: int) -> torch.Tensor:
    """``[N, A]`` bool: each row's legal moves (all where the lane has no mask, or where a row has none)."""
    legal = torch.ones(len(rows.valid), num_actions, dtype=torch.bool, device=rows.valid.device)
    mask = rows.action_mask
    if mask is None:
        return legal
    return torch.where(mask.any(dim=1, keepdim=True), mask.bool(), legal)  # a row with none: never read


class RandomOpponent(Opponent):
    """``"random"``: a uniform draw among each row's legal moves. One draw per row of the lane at every call (the
    rows it does not play too), so the stream does not depend on which rows it plays.

    Args:
        generator: the stream of its draws (on the rows' device).
    """

    def __init__(self, generator: torch.Generator):
        self.name = RANDOM_NAME
        self.generator = generator

    def act(self, rows: Rows, mine: torch.Tensor, num_actions: int, start: int = 0) -> torch.Tensor:
        legal = legal_moves(rows, num_actions)
        return torch.multinomial(legal.float(), 1, generator=self.generator).squeeze(1) + start


class BotOpponent(Opponent):
    """A user's :data:`Bot`, called once per move of the rows it plays that are to move.

    Args:
        name: ``"module:function"``, as the config names it.
        bot: the function.
        role: what it is to the run, named by its errors (``"training opponent"``, ``"evaluation opponent"``).
    """

    def __init__(self, name: str, bot: Bot, role: str = "opponent"):
        self.name, self.bot, self.role = name, bot, role

    def act(self, rows: Rows, mine: torch.Tensor, num_actions: int, start: int = 0) -> torch.Tensor:
        """The bot's moves in its rows to move (:meth:`Opponent.act`; ``start`` elsewhere, never sent).

        Raises:
            TrainingError: the bot returned an illegal move (or no integer), or raised, naming it and the move.
        """
        out = torch.zeros(len(rows.valid), dtype=torch.long)
        mask = None if rows.action_mask is None else rows.action_mask.bool().cpu().numpy()
        for i in torch.nonzero(rows.valid & mine).flatten().tolist():
            legal = np.ones(num_actions, dtype=bool) if mask is None else mask[i]
            out[i] = bot_move(self.role, self.name, self.bot, rows.obs, i, legal)
        return out.to(rows.valid.device) + start


class SnapshotOpponent(Opponent):
    """A frozen policy (a snapshot of the self-play pool): it samples its moves under each row's mask, with its own
    observation statistics, for every row of the lane (as :class:`RandomOpponent`, the stream does not depend on
    which rows it plays).

    Args:
        name: ``"snapshot@<update>"`` (:func:`snapshot_name`).
        player: one lane's policy (an :class:`shell.policies.ActorCritic`), in eval mode, never trained.
        generator: the stream of its sampled moves.
    """

    def __init__(self, name: str, player: torch.nn.Module, generator: torch.Generator):
        self.name, self.player, self.generator = name, player, generator

    def act(self, rows: Rows, mine: torch.Tensor, num_actions: int, start: int = 0) -> torch.Tensor:
        return self.player.act(rows.obs, deterministic=False, generator=self.generator, action_mask=rows.action_mask)


def play_rows(actions: torch.Tensor, opponent: Opponent, rows: Rows, mine: torch.Tensor,
              num_actions: int, start: int = 0) -> torch.Tensor:
    """``actions`` (``[N]``, or ``[N, K]`` for K-part moves, as the env takes them) with ``opponent``'s moves in its
    rows ``mine [N]`` bool (:meth:`Opponent.act`, a ``Discrete(num_actions, start)`` lane's) and the given actions
    elsewhere."""
    theirs = opponent.act(rows, mine, num_actions, start)
    where = mine.view(-1, *[1] * (actions.dim() - 1))  # over each row's components
    return torch.where(where, theirs.to(actions.dtype), actions)


def snapshot_name(update: int) -> str:
    """A snapshot's name in evaluations and ratings: ``"snapshot@<update>"``, the update after which it was taken
    (0: the initial policy)."""
    return f"snapshot@{update}"


def import_bots(names: Sequence[str], key: str) -> dict[str, Bot | None]:
    """Each entry of the config list ``key`` (``run.eval_opponents``, ``selfplay.bots``) with its bot (None for
    ``"random"``), imported now.

    Raises:
        ConfigError: one line, an entry that cannot be imported or is not callable.
    """
    bots: dict[str, Bot | None] = {}
    for name in names:
        if not isinstance(name, str):
            raise ConfigError(f"{key} entry {name!r} is not a name: give \"random\" or a bot's "
                              "\"module:function\"")
        bot = None if name == RANDOM_NAME else import_object(name, f"{key} entry {name!r}")
        if bot is not None and not callable(bot):
            raise ConfigError(f"{key} entry {name!r} is an object of type {type(bot).__name__}, not a function of "
                              "(observation, action_mask)")
        bots[name] = bot
    return bots


def named_opponent(name: str, bot: Bot | None, generator: torch.Generator, role: str) -> Opponent:
    """The opponent a config's entry names: :class:`RandomOpponent` drawing from ``generator`` for ``"random"``
    (``bot`` None), else :class:`BotOpponent`."""
    return RandomOpponent(generator) if bot is None else BotOpponent(name, bot, role)


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
        raise TrainingError(f"{role} {name!r} returned {move!r}, not an integer move; the legal moves were "
                            f"{np.flatnonzero(legal).tolist()}") from None
    if not 0 <= index < len(legal) or not legal[index]:
        raise TrainingError(f"{role} {name!r} played the illegal move {move!r}; the legal moves were "
                            f"{np.flatnonzero(legal).tolist()}")
    return index
