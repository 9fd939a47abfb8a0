"""The N copies of a PettingZoo env, stepped together: :class:`SyncCopies` in this process
(``env.vectorization_mode = "sync"``) or :class:`AsyncCopies` over worker processes (``"async"``,
:class:`shell.workers.WorkerPool`).

Both answer a joint step with each copy's ``(obs, rewards, terms, truncs, infos, agents after, state, mover)`` and
a reset with each named copy's ``(obs, infos, agents, state, mover)``: PettingZoo's dicts as the env returns them,
the agents still there, the env's global ``state()`` when the critic needs it (else None), and the seat to move
next in a turn-based game (:class:`shell.envs.pettingzoo.turns.TurnGame`; None for a parallel env).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from shell.envs.pettingzoo.turns import TurnGame
from shell.errors import ConfigError, TrainingError, first_line
from shell.workers import WorkerPool, split, usable_cpus


def _step_copy(env: Any, joint: dict, with_state: bool) -> tuple:
    obs, rewards, terms, truncs, infos = env.step(joint)
    return obs, rewards, terms, truncs, infos, list(env.agents), _state(env) if with_state else None, _mover(env)


def _reset_one(env: Any, seed: int | None, with_state: bool) -> tuple:
    obs, infos = env.reset(seed=seed)
    return obs, infos, list(env.agents), _state(env) if with_state else None, _mover(env)


def _mover(env: Any) -> str | None:
    return env.mover if isinstance(env, TurnGame) else None


def make_copy(factory: Callable[..., Any], render_mode: str | None) -> Any:
    """One copy from a factory: ``factory(render_mode=...)`` where a render mode is asked, else ``factory()``."""
    return factory(render_mode=render_mode) if render_mode else factory()


def _state(env: Any) -> np.ndarray:
    return np.asarray(env.state(), dtype=np.float32).reshape(-1)


class SyncCopies:
    """The N copies stepped one after another in this process (``env.vectorization_mode = "sync"``)."""

    def __init__(self, envs: list[Any], with_state: bool):
        self.envs, self.with_state = envs, with_state

    def step(self, joints: list[dict]) -> list[tuple]:
        """Each copy's ``(obs, rewards, terms, truncs, infos, agents after, state, mover)`` for its joint action."""
        return [_step_copy(env, joint, self.with_state) for env, joint in zip(self.envs, joints, strict=True)]

    def reset(self, seeds: dict[int, int | None]) -> dict[int, tuple]:
        """Reset the copies named: ``{i: (obs, infos, agents, state, mover)}``."""
        return {i: _reset_one(self.envs[i], seed, self.with_state) for i, seed in seeds.items()}

    def render(self) -> Any:
        return self.envs[0].render()

    def close(self) -> None:
        for env in self.envs:
            try:
                env.close()
            except Exception:
                pass


def _share(factory: Callable[..., Any], count: int, render_mode: str | None, with_state: bool) -> SyncCopies:
    """A worker's share of :class:`AsyncCopies`: ``count`` copies, stepped in turn in the worker process
    (:class:`shell.workers.WorkerPool` calls its ``step``, ``reset`` and ``close``)."""
    share = SyncCopies([], with_state)
    try:
        for _ in range(count):
            share.envs.append(make_copy(factory, render_mode))
    except BaseException:
        share.close()
        raise
    return share


class AsyncCopies:
    """The N copies split over this process and worker processes, one share per CPU, stepped at the same time
    (``env.vectorization_mode = "async"``): the workers step their shares while this process steps its own.
    The workers are a :class:`shell.workers.WorkerPool`: forked where the platform allows (a factory need not
    pickle), and they end with this process, also when it is killed. Results are those of the copies stepped
    in turn: each copy has its own generator.

    Raises:
        ConfigError: a worker could not make its copies (one line).
    """

    def __init__(self, factory: Callable[..., Any], copies: int, render_mode: str | None, with_state: bool,
                 name: str, shares: int | None = None):
        parts = split(copies, shares or usable_cpus())
        self.name = name
        self.local = SyncCopies([], with_state)  # share 0: stepped here
        self.local_part, self.slices = parts[0], parts[1:]
        self.pool = WorkerPool(_share, [(factory, len(part), render_mode, with_state) for part in self.slices],
                               name=f"ppo-core-{name}")
        try:
            for _ in self.local_part:
                try:
                    self.local.envs.append(make_copy(factory, render_mode))
                except Exception as exc:
                    raise ConfigError(f"cannot make env {name!r}: {type(exc).__name__}: {first_line(exc)}") from None
            for w in range(len(self.pool)):
                self.pool.receive(w, ConfigError, f"cannot make env {name!r} in a worker")
        except ConfigError:
            self.close()
            raise

    def step(self, joints: list[dict]) -> list[tuple]:
        for w, part in enumerate(self.slices):
            self.pool.send(w, "step", [joints[i] for i in part])
        out = self.local.step([joints[i] for i in self.local_part])
        for w in range(len(self.slices)):
            out += self.pool.receive(w, TrainingError, f"env {self.name} raised")
        return out

    def reset(self, seeds: dict[int, int | None]) -> dict[int, tuple]:
        asked = []
        for w, part in enumerate(self.slices):
            mine = {i - part.start: seed for i, seed in seeds.items() if i in part}
            if mine:
                self.pool.send(w, "reset", mine)
                asked.append((w, part))
        out = self.local.reset({i: seed for i, seed in seeds.items() if i in self.local_part})
        for w, part in asked:
            got = self.pool.receive(w, TrainingError, f"env {self.name} raised on reset")
            out.update({part.start + i: value for i, value in got.items()})
        return out

    def render(self) -> Any:
        return self.local.render()

    def close(self) -> None:
        self.local.close()
        self.pool.close()
