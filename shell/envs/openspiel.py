"""The OpenSpiel backend: two-player turn-based games of OpenSpiel (``pyspiel``), played through the PettingZoo
backend's turns and lanes (DESIGN.md, "The fifth round").

``env.backend = "openspiel"`` and ``env.id`` names an OpenSpiel game (``"kuhn_poker"``, ``"leduc_poker"``,
``"liars_dice"``; ``pyspiel.registered_names()`` lists them, a game of your own once registered with pyspiel);
``env.kwargs`` are its parameters (``{ players = 2 }``, checked against the game's own parameter list and types).

Each copy is one game as a PettingZoo AEC env (:func:`game_env`), and the PettingZoo backend plays it: one
move per joint step, only the seat to move has a valid row, a seat's reward is what it collected since its own
last move, and the end of a game gives both seats their final transition
(:class:`shell.envs.pettingzoo.turns.TurnGame`). There is no second turn loop here.

- **Seats.** Agents ``player_0`` and ``player_1``: OpenSpiel's players 0 and 1. They share their spaces, so by
  default one policy (group ``"player"``) plays both seats.
- **Observation.** A seat's observation is OpenSpiel's ``information_state_tensor(player)`` for it, unchanged,
  as float32 ``[D]`` (``D = game.information_state_tensor_size()``); a game without one gives its
  ``observation_tensor(player)`` (``D = game.observation_tensor_size()``). The space is
  ``Box(-inf, inf, (D,), float32)``.
- **Legal moves.** ``Discrete(game.num_distinct_actions())``; the mask is ``state.legal_actions_mask(player)``
  (int8 ``[A]``), in every seat's ``info["action_mask"]`` (all zeros for the seat that is not to move).
- **Rewards.** A seat's reward at a move is the change of its ``state.returns()``: a game that pays at its end
  (poker) pays each seat its return when the game ends.
- **State.** ``state()`` (PettingZoo's) is every seat's observation concatenated, float32 ``[2 * D]``: what the
  seats know between them (in poker both private cards and the bets). It is the critic's input with
  ``policy.critic = "state"``; the actor, and so the trained policy, sees only its seat's observation.
- **Chance.** Chance nodes (the deal, Leduc's public card) are sampled from the copy's own generator,
  ``numpy.random.default_rng(seed)`` with the reset seed of that copy (:mod:`shell.seeding`: spawned from
  ``run.seed``); a reset without a seed continues the copy's generator, as PettingZoo envs do.

Refused in one line (ConfigError): an unknown game or parameter, a simultaneous-move game, a game of other than
two players, a game whose chance OpenSpiel samples itself (``SAMPLED_STOCHASTIC``: its deals could not come from
the run's streams), and a game with neither tensor.
"""

from __future__ import annotations

import bisect
import importlib
import itertools
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import refuse_gymnasium_settings, source_name
from shell.envs.pettingzoo import backend as pettingzoo
from shell.errors import ConfigError, clipped, first_line
from shell.installation import install_hint

__all__ = ["SEATS", "OpenSpielAEC", "check_config", "check_game", "eval_config", "from_factory", "game_env",
           "load_game", "make", "make_game", "pyspiel_module", "run_game", "seat_observation", "seat_text"]

SEATS = ("player_0", "player_1")
"""The agents' names: seat i is OpenSpiel's player i."""


def pyspiel_module() -> Any:
    """``pyspiel``, imported now (with the ``open_spiel`` package, whose version a run records).

    Raises:
        ConfigError: OpenSpiel is not installed (naming the openspiel extra).
    """
    try:
        importlib.import_module("open_spiel")
        return importlib.import_module("pyspiel")
    except ImportError:
        raise ConfigError(f"env.backend = 'openspiel' needs OpenSpiel; run: {install_hint('openspiel')}") from None


def _aec_base() -> type:
    """PettingZoo's ``AECEnv`` (the base of :func:`game_env`), imported now.

    Raises:
        ConfigError: PettingZoo is not installed (naming the openspiel extra, which installs it).
    """
    try:
        from pettingzoo.utils.env import AECEnv
    except ImportError:
        raise ConfigError("env.backend = 'openspiel' plays its games through PettingZoo's turns; run: "
                          f"{install_hint('openspiel')}") from None
    return AECEnv


def _check_params(name: str, game_type: Any, params: Mapping[str, Any]) -> dict[str, Any]:
    """``env.kwargs`` as the game's parameters: each a parameter of the game, of its type (an int serves a float
    parameter). Checked here, so that no OpenSpiel error text (which lists every game) reaches the terminal.

    Raises:
        ConfigError: an unknown parameter or a value of the wrong type (one line).
    """
    spec = dict(game_type.parameter_specification)
    out: dict[str, Any] = {}
    for key, value in params.items():
        if key not in spec:
            raise ConfigError(f"env.kwargs: OpenSpiel game {name!r} has no parameter {key!r}; its parameters are "
                              f"{clipped(sorted(spec), 80)}")
        default = spec[key]
        if isinstance(default, bool):
            ok = isinstance(value, bool)
        elif isinstance(default, int):
            ok = isinstance(value, int) and not isinstance(value, bool)
        elif isinstance(default, float):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            value = float(value) if ok else value
        elif isinstance(default, str):
            ok = isinstance(value, str)
        else:  # a nested game's parameters: OpenSpiel checks them
            ok = True
        if not ok:
            kind = type(default).__name__
            raise ConfigError(f"env.kwargs.{key} = {value!r}: OpenSpiel game {name!r} takes "
                              f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} there (default {default!r})")
        out[key] = value
    return out


def run_game(cfg: EnvConfig) -> Any:
    """The OpenSpiel game a run of ``cfg`` plays (``env.id`` with ``env.kwargs``: :func:`load_game`).

    Raises:
        ConfigError: the run is not of this backend (one line naming its env and backend); as :func:`load_game`.
    """
    if cfg.backend != "openspiel":
        raise ConfigError(f"exact exploitability needs a run of an OpenSpiel game (env.backend = 'openspiel'); "
                          f"this run is of {cfg.id!r} on env.backend = {cfg.backend!r}")
    return load_game(cfg.id, cfg.kwargs)


def load_game(name: str, params: Mapping[str, Any] | None = None) -> Any:
    """The OpenSpiel game ``name`` with parameters ``params``, checked for this backend (:func:`check_game`).

    Args:
        name: a registered OpenSpiel game's short name, e.g. ``"kuhn_poker"``.
        params: its parameters (``env.kwargs``), e.g. ``{"players": 2}``.

    Returns:
        A ``pyspiel.Game``.

    Raises:
        ConfigError: OpenSpiel is missing, an unknown game or parameter, a value of the wrong type, or a game this
            backend cannot play (one line, :func:`check_game`).
    """
    pyspiel = pyspiel_module()
    if "(" in name:
        raise ConfigError(f"env.id = {name!r}: name the OpenSpiel game alone (e.g. 'leduc_poker') and put its "
                          "parameters in env.kwargs")
    types = {t.short_name: t for t in pyspiel.registered_games()}
    if name not in types:
        import difflib

        close = difflib.get_close_matches(name, list(types), n=1, cutoff=0.7)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise ConfigError(f"env.id = {name!r} is not an OpenSpiel game; {hint}pyspiel.registered_names() lists "
                          "them (env.backend = 'openspiel' makes its games from env.id)")
    game_params = _check_params(name, types[name], params or {})
    try:
        game = pyspiel.load_game(name, game_params)
    except pyspiel.SpielError as exc:
        raise ConfigError(f"cannot load OpenSpiel game {name!r} with env.kwargs = "
                          f"{clipped(repr(dict(params or {})), 40)}: {clipped(first_line(exc), 80)}") from None
    check_game(game)
    return game


def check_game(game: Any) -> None:
    """Refuse a game this backend cannot play: two-player sequential games only, chance that can be drawn from
    the run's streams, and a tensor to observe.

    Raises:
        ConfigError: a simultaneous-move (or mean-field) game, a game of other than two players, a game whose
            chance OpenSpiel samples itself, or one without an information-state or observation tensor (one line).
    """
    kind = game.get_type()
    name = str(game)
    if kind.dynamics.name != "SEQUENTIAL":
        what = "simultaneous-move" if kind.dynamics.name == "SIMULTANEOUS" else "mean-field"
        raise ConfigError(f"OpenSpiel game {name!r} is a {what} game; env.backend = 'openspiel' plays two-player "
                          "sequential (turn-based) games only")
    if game.num_players() != 2:
        raise ConfigError(f"OpenSpiel game {name!r} has {game.num_players()} players; env.backend = 'openspiel' "
                          "plays two-player games only")
    if kind.chance_mode.name == "SAMPLED_STOCHASTIC":
        raise ConfigError(f"OpenSpiel game {name!r} samples its chance events itself, so they cannot come from the "
                          "run's seeded streams; env.backend = 'openspiel' needs explicit chance outcomes")
    if not (kind.provides_information_state_tensor or kind.provides_observation_tensor):
        raise ConfigError(f"OpenSpiel game {name!r} has neither an information_state_tensor nor an "
                          "observation_tensor for a policy to observe")


def seat_observation(state: Any, player: int) -> np.ndarray:
    """What seat ``player`` observes in ``state``: OpenSpiel's ``information_state_tensor(player)``, unchanged
    (a game without one: its ``observation_tensor(player)``), float32 ``[D]``. The backend's rows and
    :mod:`shell.games.exploitability` both read it here, so training and the exact figure see the same input."""
    if state.get_game().get_type().provides_information_state_tensor:
        return np.asarray(state.information_state_tensor(player), dtype=np.float32)
    return np.asarray(state.observation_tensor(player), dtype=np.float32)


def seat_text(state: Any, player: int) -> str:
    """What seat ``player`` knows in ``state``, as OpenSpiel writes it: ``information_state_string(player)`` (a game
    without one: ``observation_string(player)``); for a person (``ppo-core play``)."""
    kind = state.get_game().get_type()
    if kind.provides_information_state_string:
        return state.information_state_string(player)
    return state.observation_string(player)


def _observation_size(game: Any) -> int:
    kind = game.get_type()
    return int(game.information_state_tensor_size() if kind.provides_information_state_tensor
               else game.observation_tensor_size())


class OpenSpielAEC:
    """One OpenSpiel game as a PettingZoo AEC env: ``reset``, ``step``, ``observe``, ``last``, ``agent_iter``,
    ``observation_space`` / ``action_space``, ``agents``, ``agent_selection``, ``rewards``,
    ``_cumulative_rewards``, ``terminations``, ``truncations``, ``infos`` (see the module docstring for the seats,
    observations, masks, rewards and chance).

    Made by :func:`game_env`, which gives it PettingZoo's ``AECEnv`` as a second base (``agent_iter``, ``last``,
    ``_was_dead_step``, ``_accumulate_rewards``) on first use, so that importing this module needs neither
    PettingZoo nor OpenSpiel.

    Args:
        game: the ``pyspiel.Game`` (checked: :func:`check_game`).

    Attributes:
        spiel_state: the ``pyspiel.State`` of the game in play (after its chance nodes are resolved); ``state()``
            is PettingZoo's method (what a ``policy.critic = "state"`` critic sees).
    """

    def __init__(self, game: Any):
        check_game(game)
        self.game = game
        self.metadata = {"render_modes": [], "name": str(game), "is_parallelizable": False}
        self.possible_agents = list(SEATS)
        self.agents: list[str] = []
        self._observation_space = spaces.Box(-np.inf, np.inf, (_observation_size(game),), np.float32)
        self._action_space = spaces.Discrete(int(game.num_distinct_actions()))
        self._tensor = "information_state_tensor" if game.get_type().provides_information_state_tensor \
            else "observation_tensor"  # what seat_observation reads
        self._rng: np.random.Generator | None = None
        self._returns = np.zeros(2)
        self.spiel_state: Any = None
        self.agent_selection: str | None = None
        self.rewards: dict[str, float] = {}
        self._cumulative_rewards: dict[str, float] = {}
        self.terminations: dict[str, bool] = {}
        self.truncations: dict[str, bool] = {}
        self.infos: dict[str, dict[str, Any]] = {}

    def observation_space(self, agent: str) -> spaces.Box:
        return self._observation_space

    def action_space(self, agent: str) -> spaces.Discrete:
        return self._action_space

    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        """A new game: the chance nodes before the first move are drawn from this copy's generator, seeded with
        ``seed`` (None: the generator continues; a fresh one from OS entropy before the first seeded reset)."""
        if seed is not None or self._rng is None:
            self._rng = np.random.default_rng(seed)
        self.spiel_state = self.game.new_initial_state()
        self._returns = np.zeros(2)
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.truncations = dict.fromkeys(self.agents, False)
        self._skip_agent_selection = None
        self._chance()
        self._settle(None)

    def _chance(self) -> None:
        """Resolve chance nodes: each outcome drawn with OpenSpiel's probabilities from this copy's generator (the
        first outcome whose cumulative probability passes a uniform draw: the float64 running sums and the
        right-side search of NumPy's cumsum and searchsorted, in plain Python, which is faster for a few outcomes)."""
        state, rng = self.spiel_state, self._rng
        while state.is_chance_node():
            outcomes = state.chance_outcomes()
            cumulative = list(itertools.accumulate(p for _, p in outcomes))
            index = bisect.bisect_right(cumulative, rng.random() * cumulative[-1])
            state.apply_action(outcomes[min(index, len(outcomes) - 1)][0])

    def _settle(self, mover: int | None) -> None:
        """After a move (or the reset) and its chance nodes: each seat's reward (the change of its return), the
        end of the game, the seat to move and every seat's mask."""
        state = self.spiel_state
        returns = np.asarray(state.returns(), dtype=np.float64)
        paid, self._returns = returns - self._returns, returns
        self.rewards = {agent: float(paid[p]) for p, agent in enumerate(SEATS) if agent in self.agents}
        self._accumulate_rewards()
        over = state.is_terminal()
        self.terminations = dict.fromkeys(self.agents, over)
        to_move = -1 if over else state.current_player()  # only its mask has a legal move
        self.infos = {agent: {"action_mask": np.asarray(state.legal_actions_mask(p), dtype=np.int8) if p == to_move
                              else np.zeros(self._action_space.n, dtype=np.int8)}
                      for p, agent in enumerate(SEATS) if agent in self.agents}
        if not over:
            self.agent_selection = SEATS[to_move]
        else:  # every seat is done: PettingZoo's iteration steps each out with step(None)
            self.agent_selection = SEATS[1 - mover] if mover is not None else SEATS[0]

    def step(self, action: Any) -> None:
        """Play ``action`` (an int of ``Discrete(A)``) for the seat to move; ``None`` for a seat whose game is over
        (PettingZoo's removal of a done agent).

        Raises:
            ValueError: an illegal move (one line, naming the legal ones).
        """
        agent = self.agent_selection
        if self.terminations[agent] or self.truncations[agent]:
            self._was_dead_step(action)
            return
        player = SEATS.index(agent)
        move = int(action)
        legal = self.spiel_state.legal_actions(player)
        if move not in legal:
            raise ValueError(f"move {move} is illegal for {agent} in OpenSpiel game {self.game}; legal: {legal}")
        self._cumulative_rewards[agent] = 0.0
        self.spiel_state.apply_action(move)
        self._chance()
        self._settle(player)

    def observe(self, agent: str) -> np.ndarray:
        """Seat ``agent``'s observation: :func:`seat_observation`, float32 ``[D]``."""
        return self._seat_tensor(SEATS.index(agent))

    def _seat_tensor(self, player: int) -> np.ndarray:
        """:func:`seat_observation` of the game in play, with the game's kind of tensor looked up once."""
        return np.asarray(getattr(self.spiel_state, self._tensor)(player), dtype=np.float32)

    def state(self) -> np.ndarray:
        """Everything the seats know, for a critic (``policy.critic = "state"``): every seat's observation
        (:func:`seat_observation`) concatenated, float32 ``[2 * D]``. In poker that is both private cards and the
        betting; the actor never sees it."""
        return np.concatenate([self._seat_tensor(p) for p in range(len(SEATS))])

    def information_text(self, agent: str) -> str:
        """What seat ``agent`` knows, as OpenSpiel writes it (:func:`seat_text`), with its legal moves by name (or,
        once the game is over, the whole final state, every card shown); for ``ppo-core play``."""
        player = SEATS.index(agent)
        text = seat_text(self.spiel_state, player)
        if self.spiel_state.is_terminal():
            return f"{text}\ngame over:\n{self.spiel_state}"
        legal = self.spiel_state.legal_actions(player)
        if not legal:
            return text
        return text + "\nmoves: " + ", ".join(f"{a} = {self.spiel_state.action_to_string(player, a)}" for a in legal)

    def move_text(self, agent: str, move: int) -> str:
        """``move`` of seat ``agent`` by name in the present state (``"1 (Bet)"``), before it is played."""
        return f"{move} ({self.spiel_state.action_to_string(SEATS.index(agent), int(move))})"

    def render(self) -> None:
        return None

    def close(self) -> None:
        return None


_AEC_CLASS: type | None = None


def game_env(game: Any) -> OpenSpielAEC:
    """One OpenSpiel game as a PettingZoo AEC env: an :class:`OpenSpielAEC` that is also a
    ``pettingzoo.AECEnv``.

    Raises:
        ConfigError: PettingZoo is missing; a game this backend cannot play (:func:`check_game`).
    """
    global _AEC_CLASS
    if _AEC_CLASS is None:
        _AEC_CLASS = type("OpenSpielAEC", (OpenSpielAEC, _aec_base()), {"__module__": __name__,
                                                                         "__doc__": OpenSpielAEC.__doc__})
    return _AEC_CLASS(game)


class _Copies:
    """A picklable factory of the copies for the PettingZoo backend (``async`` workers too): ``__name__`` is the
    game's name (what its messages call the env); each call loads the game (:func:`load_game`) as an AEC env."""

    def __init__(self, name: str, params: Mapping[str, Any]):
        self.__name__, self.params = name, dict(params)

    def __call__(self, render_mode: str | None = None) -> OpenSpielAEC:
        return game_env(load_game(self.__name__, self.params))


def check_config(cfg: EnvConfig) -> None:
    """The game loads and is one this backend plays; no gymnasium settings (wrappers, Atari chain, key filter).

    Raises:
        ConfigError: see :func:`load_game` and :func:`shell.envs.base.refuse_gymnasium_settings` (one line).
    """
    refuse_gymnasium_settings(cfg)
    load_game(cfg.id, cfg.kwargs)


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Runs on OpenSpiel games are evaluated on the same games."""
    return cfg


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> Any:
    """``num_envs`` copies of the game ``env.id`` (``env.kwargs`` its parameters), played turn by turn by the
    PettingZoo backend (a :class:`shell.envs.pettingzoo.vector.ParallelVecEnv` of
    :class:`shell.envs.pettingzoo.turns.TurnGame` copies).

    Raises:
        ConfigError: see :func:`load_game`; rendering or wrappers (none apply).
    """
    load_game(cfg.id, cfg.kwargs)  # refused here in one line, before any copy is made
    return pettingzoo.from_factory(_Copies(cfg.id, cfg.kwargs), cfg, num_envs, device, render_mode, wrappers,
                                   policy)


def from_factory(factory: Callable[[], Any], cfg: EnvConfig, num_envs: int, device: torch.device,
                 render_mode: str | None = None, wrappers: list | None = None,
                 policy: PolicyConfig | None = None) -> Any:
    """Refused: this backend makes its games from ``env.id`` (a run records the game's name and parameters, so that
    its evaluation, ``load_policy``, ``play`` and the exact exploitability can make the same game again).

    Raises:
        ConfigError: always (one line: name the game; a game of your own is registered with pyspiel first).
    """
    raise ConfigError(f"env.backend = 'openspiel' makes its games from env.id, not from a factory "
                      f"({source_name(factory)}); name the game (a game of your own: register it with pyspiel)")


def make_game(cfg: EnvConfig) -> Any:
    """One game of ``env.id`` as the AEC env (:func:`game_env`) for a person to play (``ppo-core play``): it
    offers ``information_text(agent)`` (what that seat knows, in OpenSpiel's words) and ``move_text(agent, move)``.

    Raises:
        ConfigError: see :func:`load_game`.
    """
    return game_env(load_game(cfg.id, cfg.kwargs))
