"""A generic turn-based game for the fuzzer: a PettingZoo AEC env built from a JSON spec (``env.backend =
"pettingzoo"``, ``env.id = "tests.fuzz.fuzz_turns"`` with ``env.kwargs = { spec = "<JSON>" }``, or a factory
``lambda: FuzzGame(spec)``, as a user's own game is given: docs/guides/turn-based.md).

The spec (drawn by ``tests/fuzz/strategies.py``, :func:`tests.fuzz.strategies.game_spec`):

- ``seats``: a list of ``{"obs", "act"}``, one per seat (``seat_0``, ``seat_1``, ...), space specs of
  tests/fuzz/fuzz_envs.py; seats of equal spaces form one group (one policy, self-play), others a group each;
- ``mask``: where the mover's legal moves are given: None (every move legal), ``"obs"`` (a Dict observation with
  an ``"action_mask"`` key beside the seat's own parts: ``"observation"``, or a Dict's own keys) or ``"info"``
  (``infos[seat]["action_mask"]``); ``mask_dtype``: ``"int8"`` (a Box, as PettingZoo's classic games) or
  ``"multibinary"``; ``waiting``: what a seat that is not to move is shown: ``"zeros"`` (the classic games),
  ``"ones"``, ``"random"`` (any bits, none legal or all), or ``"absent"`` (no info key; with ``"info"`` only);
  ``one_legal``: the chance that a move has a single legal action (else each is legal with chance 0.6, and one
  always is); the legal moves change at every move;
- ``order``: who moves next: ``"cycle"`` (the seats in turn, from a random first seat) or ``"random"`` (any seat
  still playing, the mover again included);
- ``games``: a cycle of ``[moves, end, winner]``: the game ends after that many moves, ``"terminated"``,
  ``"truncated"`` or ``"both"`` for every seat still playing; ``winner`` (an index, or -1 for a draw) is paid
  ``end_reward`` and every other seat ``-end_reward`` (when ``rewards`` pays at the end);
- ``rewards``: ``"end"`` (the game's outcome only), ``"move"`` (a random reward to every seat still playing, at every
  move) or ``"both"``; ``reward_scale``;
- ``leave``: None or ``{"seat", "after"}``: that seat is terminated after the game's ``after``-th move while the
  others play on (stepped out with ``step(None)`` as the AEC API asks); a game of one seat left goes on;
- ``fault``: None or ``{"kind", "at"}``: at the env's ``at``-th move over its life it ``"raise"``s, pays a
  ``"nan_reward"``, shows a ``"nan_obs"`` or an ``"outside_obs"``, or gives the mover ``"no_legal"`` move;
- ``enforce_mask``: false for a run told to ignore the mask (``env.action_mask = "none"``);
- ``seed``: the env's own draws (a reset's seed is mixed in).

Every move is checked: one for a seat whose turn it is not, outside the action space, or against the mover's
mask raises :class:`tests.fuzz.fuzz_envs.FuzzIllegalAction` (a bug of the library, never the env's own fault).
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np
from gymnasium import spaces
from pettingzoo import AECEnv

from tests.fuzz.fuzz_envs import (
    MASK_KEY,
    FuzzEnvFault,
    FuzzIllegalAction,
    components,
    draw,
    mask_size,
    outside,
    space_from_spec,
    with_nan,
)


def draw_mask(space: spaces.Space, rng: np.random.Generator, one_legal: float) -> np.ndarray:
    """A random ``[A]`` bool mask with at least one legal move per component (MultiBinary: any bits)."""
    size = mask_size(space)
    mask = np.zeros(size, bool)
    sizes = components(space)
    if not sizes:  # MultiBinary: a bit may be forbidden (set to 0), all of them included
        mask[:] = rng.random(size) < (0.0 if rng.random() < one_legal else 0.6)
        return mask
    start = 0
    for n in sizes:
        if rng.random() < one_legal:
            mask[start + rng.integers(n)] = True
        else:
            mask[start:start + n] = rng.random(n) < 0.6
            mask[start + rng.integers(n)] = True
        start += n
    return mask


def check_move(space: spaces.Space, mask: np.ndarray | None, action: Any, who: str) -> None:
    """Raise :class:`FuzzIllegalAction` for an action outside ``space`` or against ``mask``."""
    value = np.asarray(action, dtype=space.dtype) if np.ndim(action) else action
    if action is None or not space.contains(value):
        raise FuzzIllegalAction(f"move {action!r} of {who} outside {space}")
    if mask is None:
        return
    flat = np.asarray(action).ravel()
    if isinstance(space, spaces.MultiBinary):
        if np.any(flat.astype(bool) & ~mask):
            raise FuzzIllegalAction(f"move {flat.tolist()} of {who} against its mask {mask.astype(int).tolist()}")
        return
    offsets = np.concatenate([[0], np.cumsum(components(space))[:-1]]).astype(np.int64)
    index = flat.astype(np.int64) - np.asarray(space.start).ravel().astype(np.int64) + offsets
    if not np.all(mask[index]):
        raise FuzzIllegalAction(f"move {flat.tolist()} of {who} against its mask {mask.astype(int).tolist()}")


class FuzzGame(AECEnv):
    """The turn-based game a spec describes (module docstring)."""

    metadata: ClassVar[dict] = {"name": "fuzz_turns_v0", "render_modes": ["rgb_array"], "is_parallelizable": False}

    def __init__(self, spec: str | dict, render_mode: str | None = None):
        super().__init__()
        data = json.loads(spec) if isinstance(spec, str) else spec
        self.data = data
        self.possible_agents = [f"seat_{i}" for i in range(len(data["seats"]))]
        self.own_spaces = {a: space_from_spec(s["obs"]) for a, s in zip(self.possible_agents, data["seats"],
                                                                         strict=True)}
        self.action_spaces_ = {a: space_from_spec(s["act"]) for a, s in zip(self.possible_agents, data["seats"],
                                                                             strict=True)}
        self.mask_mode = data.get("mask")
        self.enforce_mask = data.get("enforce_mask", True)
        self.render_mode = render_mode
        self.rng = np.random.default_rng(data.get("seed", 0))
        self.total = 0  # moves over the env's life
        self.game = 0
        self.moves = 0
        self.agents: list[str] = []
        self.masks: dict[str, np.ndarray] = {}
        self.current: dict[str, Any] = {}

    # -- spaces
    def _masked(self, agent: str) -> bool:
        return self.mask_mode is not None and mask_size(self.action_spaces_[agent]) is not None

    def _mask_space(self, agent: str) -> spaces.Space:
        size = mask_size(self.action_spaces_[agent])
        if self.data.get("mask_dtype") == "multibinary":
            return spaces.MultiBinary(size)
        return spaces.Box(0, 1, (size,), np.int8)

    def observation_space(self, agent: str) -> spaces.Space:
        own = self.own_spaces[agent]
        if self.mask_mode == "obs" and self._masked(agent):
            parts = dict(own.spaces) if isinstance(own, spaces.Dict) else {"observation": own}
            return spaces.Dict({**parts, MASK_KEY: self._mask_space(agent)})
        return own

    def action_space(self, agent: str) -> spaces.Space:
        return self.action_spaces_[agent]

    # -- what each seat sees
    def _fault_now(self, kind: str) -> bool:
        fault = self.data.get("fault")
        return fault is not None and fault["kind"] == kind and self.total == fault["at"]

    def _shown_mask(self, agent: str) -> np.ndarray | None:
        """The mask a seat is shown: the mover's legal moves, or for a waiting seat what ``waiting`` says."""
        if agent == self.agent_selection and self.agent_selection in self.masks:
            return self.masks[agent]
        size = mask_size(self.action_spaces_[agent])
        waiting = self.data.get("waiting", "zeros")
        if waiting == "absent":
            return None
        if waiting == "ones":
            return np.ones(size, bool)
        if waiting == "random":
            return self.rng.random(size) < 0.5
        return np.zeros(size, bool)

    def _draw(self) -> None:
        """After a reset or a move: the mover's legal moves, and what every seat observes (kept until the next
        move, so that ``observe`` gives the same each time it is called; a seat that left keeps its last)."""
        self.masks = {}
        mover = self.agent_selection
        if mover in self.agents and self._masked(mover) and not self._out(mover):
            mask = draw_mask(self.action_spaces_[mover], self.rng, self.data.get("one_legal", 0.0))
            if self._fault_now("no_legal"):
                mask[:] = False
            self.masks[mover] = mask
        for agent in self.agents:
            value = draw(self.own_spaces[agent], self.rng, 1.0)
            if self._fault_now("nan_obs"):
                value = with_nan(self.own_spaces[agent], value)
            if self._fault_now("outside_obs"):
                value = outside(self.own_spaces[agent], value)
            shown = self._shown_mask(agent) if self._masked(agent) else None
            if self.mask_mode == "obs" and self._masked(agent):
                parts = dict(value) if isinstance(self.own_spaces[agent], spaces.Dict) else {"observation": value}
                space = self._mask_space(agent)
                value = {**parts, MASK_KEY: np.asarray(shown, dtype=space.dtype)}
            self.current[agent] = value
            info: dict[str, Any] = {}
            if self.mask_mode == "info" and self._masked(agent) and shown is not None:
                info[MASK_KEY] = np.asarray(shown, dtype=np.int8)
            self.infos[agent] = info

    def observe(self, agent: str) -> Any:
        return self.current[agent]

    def _out(self, agent: str) -> bool:
        return bool(self.terminations.get(agent) or self.truncations.get(agent))

    # -- the AEC API
    def reset(self, seed: int | None = None, options: dict | None = None) -> None:
        if seed is not None:
            self.rng = np.random.default_rng([seed, self.data.get("seed", 0)])
        self.agents = list(self.possible_agents)
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.infos = {a: {} for a in self.agents}
        self._skip_agent_selection = None
        self.current = {}
        self.moves = 0
        self.length, self.end, self.winner = self.data["games"][self.game % len(self.data["games"])]
        self.game += 1
        self.agent_selection = self.agents[int(self.rng.integers(len(self.agents)))]
        self._draw()

    def _next_mover(self, mover: str) -> str | None:
        playing = [a for a in self.agents if not self._out(a)]
        if not playing:
            return None
        if self.data.get("order") == "random":
            return playing[int(self.rng.integers(len(playing)))]
        seats = self.possible_agents
        for k in range(1, len(seats) + 1):  # the next seat still playing after the mover, in seat order
            seat = seats[(seats.index(mover) + k) % len(seats)]
            if seat in playing:
                return seat
        return None

    def step(self, action: Any) -> None:
        agent = self.agent_selection
        if self._out(agent):
            self._was_dead_step(action)
            return
        check_move(self.action_spaces_[agent], self.masks.get(agent) if self.enforce_mask else None, action,
                   f"{agent!r} (to move at move {self.moves + 1})")
        self._cumulative_rewards[agent] = 0.0
        self.moves += 1
        self.total += 1
        if self._fault_now("raise"):
            raise FuzzEnvFault(f"planned fault at move {self.total}")
        scale = float(self.data.get("reward_scale", 1.0))
        playing = [a for a in self.agents if not self._out(a)]
        kind = self.data.get("rewards", "end")
        self.rewards = {a: float(self.rng.uniform(-1, 1)) * scale if kind in ("move", "both") and a in playing
                        else 0.0 for a in self.agents}
        leave = self.data.get("leave")
        if leave is not None and self.moves == leave["after"] and len(playing) > 1:
            seat = self.possible_agents[leave["seat"] % len(self.possible_agents)]
            if seat in playing:
                self.terminations[seat] = True
        if self.moves >= self.length:  # the game ends for every seat still playing
            for seat in playing:
                self.terminations[seat] = self.terminations[seat] or self.end in ("terminated", "both")
                self.truncations[seat] = self.end in ("truncated", "both")
            if kind in ("end", "both"):
                for i, seat in enumerate(self.possible_agents):
                    if seat in playing and self.winner >= 0:
                        self.rewards[seat] += scale if i == self.winner % len(self.possible_agents) else -scale
        if self._fault_now("nan_reward"):
            self.rewards[agent] = float("nan")
        self._accumulate_rewards()
        mover = self._next_mover(agent)
        self.agent_selection = mover if mover is not None else agent
        self._draw()
        self._deads_step_first()  # a seat that left is stepped out (step(None)) before the next move

    def render(self) -> np.ndarray:
        return np.zeros((16, 16, 3), np.uint8)

    def close(self) -> None:
        pass


def env(spec: str | dict, **kwargs: Any) -> FuzzGame:
    """The game of ``spec`` (``env.id = "tests.fuzz.fuzz_turns"``)."""
    return FuzzGame(spec, **kwargs)


def last_legal(observation: Any, action_mask: np.ndarray) -> int:
    """A bot (``run.eval_opponents``, ``selfplay.bots``): the last legal move."""
    return int(np.flatnonzero(action_mask)[-1])
