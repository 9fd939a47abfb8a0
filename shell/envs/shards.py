"""A gymnasium vector env whose sub-envs are stepped in shares at the same time: :class:`ShardedVectorEnv`
(``env.vectorization_mode = "async"`` with ``env.shares = k``).

gymnasium's ``AsyncVectorEnv`` gives every sub-env a process of its own: 16 MuJoCo envs on a 2-core machine are
17 processes and 32 pipe messages per step. Here the N sub-envs are split into k contiguous shares, as the
PettingZoo copies are (:class:`shell.envs.pettingzoo.copies.AsyncCopies`): this process steps share 0 while
k - 1 worker processes (:class:`shell.workers.WorkerPool`) step the others, each share a gymnasium
``SyncVectorEnv`` of its sub-envs. Every sub-env is built, seeded, stepped and reset exactly as in one
``SyncVectorEnv`` of all N, and the infos are merged by gymnasium's own ``VectorEnv._add_info``, called for
every sub-env in the order a ``SyncVectorEnv`` calls it, so a run gives the same numbers as with ``"sync"``
(tests/integration/test_shards.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from shell.workers import WorkerPool, split


class ShareError(RuntimeError):
    """A share's sub-env raised in a worker process, or a worker ended; the message is one line."""


class _RecordingSyncVectorEnv(gym.vector.SyncVectorEnv):
    """A ``SyncVectorEnv`` that keeps the ``(info, index)`` of each ``_add_info`` call of its last reset or step
    instead of merging them, so that the whole env can merge them at the sub-env's index in the whole."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        super().__init__(env_fns, copy=False, autoreset_mode=AutoresetMode.SAME_STEP)
        self.info_calls: list[tuple[dict, int]] = []

    def _add_info(self, vector_infos: dict, env_info: dict, env_num: int) -> dict:
        self.info_calls.append((env_info, env_num))
        return vector_infos


class Share:
    """One share's sub-envs, stepped in turn; its methods answer with plain data for the pipe: the share's
    batched observations, rewards, terminations, truncations, and the info calls of :class:`_RecordingSyncVectorEnv`.
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]]):
        self.env = _RecordingSyncVectorEnv(env_fns)

    def _calls(self) -> list[tuple[dict, int]]:
        calls, self.env.info_calls = self.env.info_calls, []
        return calls

    def step(self, actions: Any) -> tuple:
        obs, reward, terminated, truncated, _ = self.env.step(actions)
        return obs, reward, terminated, truncated, self._calls()

    def reset(self, seeds: list[int | None], options: dict | None) -> tuple:
        obs, _ = self.env.reset(seed=seeds, options=options)
        return obs, self._calls()

    def call(self, name: str, args: tuple, kwargs: dict) -> tuple:
        return self.env.call(name, *args, **kwargs)

    def set_attr(self, name: str, values: list) -> None:
        self.env.set_attr(name, values)

    def render(self) -> tuple:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _serve(env_fn: Callable[[], gym.Env], count: int) -> Share:
    """A worker's share: ``count`` sub-envs of ``env_fn`` (:class:`shell.workers.WorkerPool` calls its methods)."""
    return Share([env_fn] * count)


class ShardedVectorEnv(gym.vector.VectorEnv):
    """``num_envs`` sub-envs of ``env_fn``, SAME_STEP autoreset, stepped in ``shares`` contiguous shares at the
    same time: share 0 in this process, the others in worker processes that end with this one (a ``kill -9``
    too). Sub-env i of the whole is sub-env i of a ``SyncVectorEnv`` of all of them: the same seeds, steps,
    resets, observations, rewards and infos. ``call``, ``get_attr`` and ``set_attr`` reach every sub-env, in
    order, as a ``SyncVectorEnv``'s do; ``render`` gives every sub-env's frame.

    Args:
        env_fn: makes one sub-env; it runs in the workers too (forked where the platform allows, so it need
            not pickle).
        num_envs: N, at least 1.
        shares: k, how many shares (at most N; 1: no worker processes).
        spec: the vector env's spec (``gymnasium.make_vec``'s), or None.
        name: the env's name in messages.

    Raises:
        ShareError: one line naming the env: a worker could not make its sub-envs, or (from ``step``, ``reset``,
            ``call``, ``set_attr`` and ``render``) a worker's sub-env raised or the worker ended. What this
            process's own share raises reaches the caller as it is.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], num_envs: int, shares: int, spec: Any = None,
                 name: str = "env"):
        super().__init__()
        self.parts = split(num_envs, shares)
        self.name = name
        self.local = Share([env_fn] * len(self.parts[0]))
        self.pool: WorkerPool | None = None
        try:
            self.pool = WorkerPool(_serve, [(env_fn, len(part)) for part in self.parts[1:]], name="ppo-core-share")
            for w in range(len(self.pool)):
                self.pool.receive(w, ShareError, f"cannot make env {name!r} in a worker process")
        except BaseException:
            self.close_extras()
            raise
        self.processes = self.pool.processes  # for the one line about a worker that ended (shell/envs/gymnasium.py)
        first = self.local.env
        self.num_envs = num_envs
        self.metadata = dict(first.metadata)
        self.render_mode = first.render_mode
        self.spec = spec
        self.single_observation_space = first.single_observation_space
        self.single_action_space = first.single_action_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self._share_spaces = [batch_space(self.single_observation_space, len(p)) for p in self.parts]
        self._observations = create_empty_array(self.single_observation_space, num_envs, fn=np.zeros)
        self._rows: list[Any] = [None] * num_envs  # the last observation of each sub-env (non-array spaces)

    def _ask(self, method: str, per_share: Sequence[tuple], what: str) -> list[Any]:
        """``share.method(*per_share[w])`` on every share at once (None: skip share w); each share's answer."""
        assert self.pool is not None
        for w in range(1, len(self.parts)):
            if per_share[w] is not None:
                self.pool.send(w - 1, method, *per_share[w])
        answers: list[Any] = [None] * len(self.parts)
        try:
            if per_share[0] is not None:
                answers[0] = getattr(self.local, method)(*per_share[0])
        finally:  # every worker's answer is read, so that the pipes stay in step even when this share raised
            for w in range(1, len(self.parts)):
                if per_share[w] is not None:
                    answers[w] = self.pool.receive(w - 1, ShareError, what)
        return answers

    def _merge(self, answers: list[Any], obs_at: int, calls_at: int) -> tuple[Any, dict]:
        """The whole's observations (the shares' rows, in order, into one batch) and infos (every share's
        ``_add_info`` calls at the sub-env's index in the whole)."""
        infos: dict = {}
        arrays = isinstance(self._observations, np.ndarray)  # Box, Discrete, ...: the rows are array slices
        for part, space, answer in zip(self.parts, self._share_spaces, answers, strict=True):
            if answer is None:
                continue
            if arrays:
                self._observations[part.start:part.stop] = answer[obs_at]
            else:
                for i, row in enumerate(iterate(space, answer[obs_at])):
                    self._rows[part.start + i] = row
            for info, i in answer[calls_at]:
                infos = self._add_info(infos, info, part.start + i)
        if not arrays:
            self._observations = concatenate(self.single_observation_space, self._rows, self._observations)
        return deepcopy(self._observations), infos

    def step(self, actions: Any) -> tuple:
        if isinstance(actions, np.ndarray):
            per_share = [(actions[p.start:p.stop],) for p in self.parts]
        else:
            rows = list(iterate(self.action_space, actions))
            per_share = [(concatenate(self.single_action_space, rows[p.start:p.stop],
                                      create_empty_array(self.single_action_space, len(p))),) for p in self.parts]
        answers = self._ask("step", per_share, f"env {self.name}")
        obs, infos = self._merge(answers, 0, 4)
        reward = np.concatenate([a[1] for a in answers])
        terminated = np.concatenate([a[2] for a in answers])
        truncated = np.concatenate([a[3] for a in answers])
        return obs, reward, terminated, truncated, infos

    def reset(self, *, seed: int | list[int | None] | None = None, options: dict | None = None) -> tuple:
        if seed is None:
            seeds: list[int | None] = [None] * self.num_envs
        elif isinstance(seed, int):
            seeds = [seed + i for i in range(self.num_envs)]
        else:
            seeds = list(seed)
            if len(seeds) != self.num_envs:
                raise ValueError(f"a reset seed per sub-env: got {len(seeds)} seeds for {self.num_envs} sub-envs")
        mask = None if options is None else options.get("reset_mask")
        per_share: list[tuple | None] = []
        for p in self.parts:
            mine = options
            if mask is not None:
                mine = dict(options, reset_mask=np.asarray(mask)[p.start:p.stop])
                if not mine["reset_mask"].any():  # gymnasium refuses a mask with no sub-env to reset
                    per_share.append(None)
                    continue
            per_share.append((seeds[p.start:p.stop], mine))
        return self._merge(self._ask("reset", per_share, f"env {self.name} on reset"), 0, 1)

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple:
        answers = self._ask("call", [(name, args, kwargs)] * len(self.parts), f"env {self.name}, calling {name!r}")
        return tuple(value for answer in answers for value in answer)

    def get_attr(self, name: str) -> tuple:
        return self.call(name)

    def set_attr(self, name: str, values: Any) -> None:
        if not isinstance(values, list | tuple):
            values = [values] * self.num_envs
        if len(values) != self.num_envs:
            raise ValueError(f"values must be a list or tuple of {self.num_envs} (one per sub-env), got {len(values)}")
        self._ask("set_attr", [(name, list(values[p.start:p.stop])) for p in self.parts],
                  f"env {self.name}, setting {name!r}")

    def render(self) -> tuple:
        answers = self._ask("render", [()] * len(self.parts), f"env {self.name}, rendering")
        return tuple(frame for answer in answers for frame in answer)

    def close_extras(self, **kwargs: Any) -> None:
        """Close this process's share and the workers (theirs close in them); never raises."""
        try:
            self.local.close()
        except Exception:
            pass
        if getattr(self, "pool", None) is not None:
            self.pool.close()
