"""``ppo-core play RUN``: play a turn-based game against a trained agent in the terminal (from Python:
:func:`shell.api.play`).

The game is the run's own (``env.id``, built as PettingZoo's AEC env: :func:`shell.envs.make_game`; or, for a run
trained on a factory of the game, that factory's),
the agent the run's deterministic policy (:func:`shell.inference.policy_for`, as ``load_policy`` gives it). The
board is printed from the observation planes (:func:`board_text`), your moves are read from a text stream. A game
that writes a seat's view itself (an OpenSpiel game's ``information_text``: your own information state, never the
other seat's cards) is shown in its words, and the legal moves of a game that gives them in the info are read there.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO

import numpy as np
from gymnasium import spaces

from shell.envs import make_game
from shell.errors import ConfigError, TrainingError, first_line, said, space_text
from shell.inference import load_agent, policy_for, require_env

__all__ = ["board_text", "play"]

PIECES = (".", "X", "O")  # empty, plane 0 (the seat that observes: you), plane 1 (the other seat: the agent)


def board_text(observation: Any, action_mask: Any = None) -> str:
    """A board drawn from a classic game's observation planes ``[H, W, 2]`` (plane 0 the observing seat's pieces,
    shown as ``X``; plane 1 the other seat's, ``O``; tic-tac-toe 3x3x2, connect four 6x7x2), as text.

    Empty squares show their move's number where a move is a square (``A = H * W`` actions, row-major: tic-tac-toe),
    and the columns are numbered below the board where a move is a column (``A = W``: connect four). Other
    observations are printed as NumPy prints them.

    Args:
        observation: the seat's observation (a Dict observation's ``"observation"`` key is read; a Dict without one
            is printed key by key).
        action_mask: ``[A]`` of the seat's legal moves (only its length is read; None: no numbers).
    """
    if isinstance(observation, dict) and "observation" not in observation:  # a game's own keys: each printed
        return "\n".join(f"{key}: {np.array2string(np.asarray(part))}" for key, part in observation.items()
                         if key != "action_mask")
    planes = np.asarray(observation["observation"] if isinstance(observation, dict) else observation)
    if planes.ndim != 3 or planes.shape[-1] != 2:
        return np.array2string(planes)
    H, W, _ = planes.shape
    moves = None if action_mask is None else len(action_mask)
    lines = []
    for r in range(H):
        cells = []
        for c in range(W):
            piece = PIECES[1] if planes[r, c, 0] else PIECES[2] if planes[r, c, 1] else PIECES[0]
            if piece == PIECES[0] and moves == H * W:
                piece = str(r * W + c)
            cells.append(piece.rjust(2))
        lines.append(" ".join(cells))
    if moves == W:
        lines.append(" ".join(str(c).rjust(2) for c in range(W)))
    return "\n".join(lines)


def play(target: str | Path, seat: str | int | None = None, device: str = "cpu", stdin: TextIO | None = None,
         out: Callable[[str], None] = print, seed: int | None = None,
         env: Callable[[], Any] | None = None) -> dict[str, Any]:
    """Play one game against a run's trained agent: you move in ``seat`` (a seat's name or index; default the
    first), the agent in every other seat.

    The game is made by ``env``, a factory of the run's turn-based game (a ``Callable[[], pettingzoo.AECEnv]``,
    as ``shell.train(config, env=factory)`` took it), else from the run's config (``env.id``); a run trained on a
    factory needs it.

    Before each of your moves the board is printed (:func:`board_text`, from your observation) with your legal
    moves; a line of ``stdin`` is your move, and an illegal or unreadable one is refused with the legal list and
    asked again. At the end the final board and the result are printed.

    Returns:
        ``{"seat", "score", "result", "moves"}``: your seat, your score (the game's own rewards: +1 win, 0 draw,
        -1 loss in the classic games), ``"win"``, ``"draw"`` or ``"loss"``, and how many moves both sides made
        (an int); or, where
        ``stdin`` ended before the game, ``"result": "unfinished"``.

    Raises:
        ConfigError: a bad target; a run that is not of a turn-based game, or was trained on a factory and no
            ``env`` is given (its config cannot rebuild the game); an ``env`` that does not make a turn-based game;
            an unknown seat; a seat whose moves are not one Discrete choice (MultiDiscrete, MultiBinary, Box).
        TrainingError: the game raised (one line naming it and the exception), or paid a non-finite reward.
    """
    import sys

    stdin = sys.stdin if stdin is None else stdin
    if env is not None and not callable(env):
        raise ConfigError(f"env must be a factory of the run's game (a Callable[[], pettingzoo.AECEnv]), not "
                          f"{type(env).__name__}")
    agent, config, state = load_agent(target, device)
    require_env(target, state, env, f"play it from Python with the factory of its game: shell.play("
                                     f"{str(target)!r}, env=<game factory>)")
    agents = (state.get("spaces") or {}).get("agents")
    game = (_game_of(env) if env is not None else make_game(config.env)) if agents else None
    if game is None:
        raise ConfigError(f"play serves runs of turn-based PettingZoo games; {target} is a run of {config.env.id!r}")
    try:
        policy = policy_for(agent, agents, config.policy.agent_id)
        seats = list(game.possible_agents)
        you = _seat(seat, seats)
        space = game.action_space(you)
        if not isinstance(space, spaces.Discrete):
            raise ConfigError(f"play reads one number a move; seat {you!r} moves in {space_text(space, 48)}: "
                              f"evaluate it with {said('evaluate' if env is None else 'evaluate_env', str(target))}")
        start = int(space.start)
        _game_call(game, "reset", lambda: game.reset(seed=seed))
        score, moves = 0.0, 0
        for mover in game.agent_iter():
            obs, reward, term, trunc, info = _game_call(game, "last", game.last)
            if not np.isfinite(reward):
                raise TrainingError(f"the game paid seat {mover!r} a non-finite reward ({float(reward)}) after "
                                    f"move {moves}")
            if mover == you:
                score += float(reward)
            if term or trunc:
                _game_call(game, "step", lambda: game.step(None))
                continue
            info_mask = _info_mask(info)
            if mover == you:
                shown = info_mask if info_mask is not None or not isinstance(obs, dict) else obs.get("action_mask")
                move = _your_move(obs, int(space.n), stdin, out, you, info_mask,
                                  _seat_view(game, you, obs, shown), start)  # the board numbers the free squares
                if move is None:
                    out(json.dumps({"seat": you, "score": score, "result": "unfinished", "moves": moves}))
                    return {"seat": you, "score": score, "result": "unfinished", "moves": moves}
            else:
                masks = {} if info_mask is None else {"action_mask": {mover: info_mask}}
                move = int(policy({mover: obs}, **masks)[mover])
                named = getattr(game, "move_text", None)
                out(f"{mover} (agent) plays {named(mover, move) if callable(named) else move}")
            _game_call(game, "step", lambda move=move: game.step(move))
            moves += 1
        out(_seat_view(game, you, _game_call(game, "observe", lambda: game.observe(you)), None))
        result = "win" if score > 0 else "loss" if score < 0 else "draw"
        outcome = {"seat": you, "score": score, "result": result, "moves": moves}
        out(json.dumps(outcome))
        return outcome
    finally:
        game.close()


def _game_call(game: Any, what: str, call: Callable[[], Any]) -> Any:
    """``call()``, a call into the game (its ``reset``, ``last``, ``step`` or ``observe``); what the game raises
    ends play in one line (TrainingError), as it ends training and evaluation."""
    try:
        return call()
    except (ConfigError, TrainingError):
        raise
    except Exception as exc:
        raise TrainingError(f"the game {type(game).__name__} raised {type(exc).__name__} on {what}: "
                            f"{first_line(exc)}") from exc


def _game_of(factory: Callable[[], Any]) -> Any:
    """The turn-based game ``factory()`` makes (PettingZoo's AEC env, as :func:`shell.envs.make_game` gives one).

    Raises:
        ConfigError: it makes something else (a parallel env).
    """
    game = factory()
    if not callable(getattr(game, "agent_iter", None)):
        close = getattr(game, "close", None)
        if callable(close):
            close()
        raise ConfigError(f"env makes a {type(game).__name__}, not a turn-based game (a PettingZoo AECEnv): play "
                          "serves turn-based games")
    return game


def _seat(seat: str | int | None, seats: list[str]) -> str:
    """The seat named (or numbered: an int, or its digits) ``seat``; the first when None. ConfigError for
    another."""
    if seat is None:
        return seats[0]
    if seat in seats:
        return seat
    index = seat if isinstance(seat, int) and not isinstance(seat, bool) else \
        int(seat) if isinstance(seat, str) and seat.isdigit() else None
    if index is not None and 0 <= index < len(seats):
        return seats[index]
    raise ConfigError(f"{said('seat', seat)} is not a seat of this game; pick one of {seats} (or its index)")


def _your_move(obs: Any, n: int, stdin: TextIO, out: Callable[[str], None], you: str,
               info_mask: np.ndarray | None = None, view: str | None = None, start: int = 0) -> int | None:
    """Your move of the ``n`` of a ``Discrete(n, start)`` space from ``stdin``, as the game takes it (asked again
    until legal: the observation's ``action_mask``, else the info's (``info_mask``), else any); None at the end of
    the input. ``view`` is what is printed first (default: :func:`board_text` of the observation)."""
    mask = np.asarray(obs["action_mask"], dtype=bool) if isinstance(obs, dict) and "action_mask" in obs \
        else info_mask if info_mask is not None else np.ones(n, dtype=bool)
    legal = (np.flatnonzero(mask) + start).tolist()
    out(board_text(obs, mask) if view is None else view)
    while True:
        out(f"{you} (you, X): your move {legal}> ")
        line = stdin.readline()
        if not line:
            return None
        text = line.strip()
        try:
            move = int(text)
        except ValueError:
            move = None
        if move in legal:
            return move
        out(f"illegal move {text!r}; legal moves: {legal}")


# -- games that describe a seat's view themselves, with masks in the info (OpenSpiel's: shell/envs/openspiel.py)
def _info_mask(info: Any) -> np.ndarray | None:
    """``[A]`` bool: the legal moves an AEC env gives in the mover's info (``info["action_mask"]``), or None."""
    mask = info.get("action_mask") if isinstance(info, dict) else None
    return None if mask is None else np.asarray(mask, dtype=bool)


def _seat_view(game: Any, seat: str, obs: Any, mask: Any) -> str:
    """What seat ``seat`` is shown: the game's own text of what that seat knows where it writes one
    (``game.information_text(seat)``: an OpenSpiel game's information state, never the other seat's cards), else
    :func:`board_text` of the observation."""
    describe = getattr(game, "information_text", None)
    return describe(seat) if callable(describe) else board_text(obs, mask)
