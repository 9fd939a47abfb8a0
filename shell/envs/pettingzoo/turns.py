"""A turn-based (AEC) PettingZoo game as the copies step it (:class:`TurnGame`): one move per step, with
PettingZoo's Parallel-API dicts, so that :mod:`shell.envs.pettingzoo.copies` and
:class:`shell.envs.pettingzoo.rows.GroupRows` serve it as they serve a parallel env (DESIGN.md, "Turns").
"""

from __future__ import annotations

from typing import Any


def _forwarded(env: Any) -> Any:
    """The env under PettingZoo's own wrappers (``pettingzoo.utils.wrappers``, whose every attribute read goes to the
    env they wrap): reading ``agents``, ``terminations`` and the like there gives the same objects without a chain
    of ``__getattr__`` calls (a third of a tic-tac-toe move's time). Any other wrapper stops the walk: it may answer
    a read itself."""
    from pettingzoo.utils import wrappers

    forwarding = (wrappers.BaseWrapper, wrappers.OrderEnforcingWrapper, wrappers.AssertOutOfBoundsWrapper,
                  wrappers.TerminateIllegalWrapper, wrappers.CaptureStdoutWrapper, wrappers.ClipOutOfBoundsWrapper)
    while type(env) in forwarding:
        env = env.env
    return env


def is_turn_based(env: Any) -> bool:
    """Whether ``env`` is a PettingZoo AEC env (it has ``agent_selection`` or ``agent_iter``)."""
    return hasattr(env, "agent_iter") or hasattr(env, "agent_selection")


class TurnGame:
    """An AEC env whose seats move in turn, one move per :meth:`step`.

    :attr:`mover` is the seat to move (None once the game is over); :meth:`step` takes ``{mover: action}``
    and returns ``(obs, rewards, terminations, truncations, infos)`` as a ParallelEnv does:

    - ``obs``: every seat's own observation of the position after the move (PettingZoo's ``observe``),
      also the final observation of a seat whose game just ended;
    - ``rewards``: a seat's reward is what it collected since its own last move, as PettingZoo's
      ``last()`` gives it (the env's ``_cumulative_rewards``, which the env zeroes when the seat moves).
      It is paid once, at the step after which the seat is to move, or at the step that ends the
      seat's game; every other seat gets nothing at that step;
    - ``terminations`` / ``truncations``: the seats whose game ended at this move, each once. The end of
      a game ends every seat, also those that did not move last (the loser of connect four). A seat that
      leaves while the others play on is stepped out with PettingZoo's ``step(None)`` when its turn
      comes, as the AEC API asks;
    - :attr:`agents`: the seats still playing (none once the game is over).

    ``max_moves`` (``env.max_episode_steps``) truncates every seat still playing after that many moves.

    Args:
        env: the AEC env (closed with this object).
        max_moves: the moves after which the game is truncated (None: the game's own end).
    """

    def __init__(self, env: Any, max_moves: int | None = None):
        self.env, self.max_moves = env, max_moves
        self._game = _forwarded(env)  # where the game's state is read (the moves and observations go through env)
        self.possible_agents = list(env.possible_agents)
        self.metadata = getattr(env, "metadata", None) or {}
        self.agents: list[str] = []
        self.moves = 0
        self._ended: set[str] = set()

    def observation_space(self, agent: str) -> Any:
        return self.env.observation_space(agent)

    def action_space(self, agent: str) -> Any:
        return self.env.action_space(agent)

    @property
    def mover(self) -> str | None:
        """The seat to move, None when the game is over."""
        return self._game.agent_selection if self.agents else None

    def reset(self, seed: int | None = None) -> tuple[dict, dict]:
        """A new game: every seat's observation and info.

        Raises:
            TypeError: the env keeps no ``_cumulative_rewards`` dict (PettingZoo's AEC API has one).
        """
        self.env.reset(seed=seed)
        if not isinstance(getattr(self._game, "_cumulative_rewards", None), dict):
            raise TypeError("an AEC env keeps each agent's reward since its last move in _cumulative_rewards "
                            "(a dict, what last() returns); this one has none after reset()")
        self.moves, self._ended = 0, set()
        self.agents = list(self._game.agents)
        return self._observe(), self._infos()

    def step(self, actions: dict[str, Any]) -> tuple[dict, dict, dict, dict, dict]:
        """Play the mover's action (``actions[mover]``; others are not read).

        Raises:
            KeyError: ``actions`` has no action of the mover.
        """
        env, game = self.env, self._game
        env.step(actions[game.agent_selection])
        self.moves += 1
        cut = self.max_moves is not None and self.moves >= self.max_moves
        rewards: dict[str, float] = {}
        terms: dict[str, bool] = {}
        truncs: dict[str, bool] = {}
        for agent in game.agents:
            if agent in self._ended:
                continue
            term, trunc = bool(game.terminations[agent]), bool(game.truncations[agent]) or cut
            if term or trunc:  # the seat's game is over: its final transition
                self._ended.add(agent)
                rewards[agent], terms[agent], truncs[agent] = self._collected(agent), term, trunc and not term
        obs, infos = self._observe(), self._infos()  # before a seat that left is stepped out
        playing = [a for a in game.agents if a not in self._ended]
        while playing and game.agents and self._out(game.agent_selection):
            env.step(None)  # PettingZoo's removal of a seat that left: its turn, action None
        self.agents = playing
        if playing:
            mover = game.agent_selection
            rewards[mover] = self._collected(mover)
        return obs, rewards, terms, truncs, infos

    def _out(self, agent: str) -> bool:
        return bool(self._game.terminations[agent] or self._game.truncations[agent])

    def _collected(self, agent: str) -> float:
        """What the seat collected since its own last move (what ``last()`` would give it)."""
        return float(self._game._cumulative_rewards.get(agent, 0.0))

    def _observe(self) -> dict[str, Any]:
        return {agent: self.env.observe(agent) for agent in self._game.agents}

    def _infos(self) -> dict[str, Any]:
        infos = getattr(self._game, "infos", None) or {}
        return {agent: infos.get(agent) or {} for agent in self._game.agents}

    def state(self) -> Any:
        return self.env.state()

    def render(self) -> Any:
        return self.env.render()

    def close(self) -> None:
        self.env.close()
