"""A gymnasium vector env whose sub-envs are stepped in shares at the same time: :class:`ShardedVectorEnv`
(``env.vectorization_mode = "async"`` with ``env.shares = k``, or ``"threads"``).

gymnasium's ``AsyncVectorEnv`` gives every sub-env a process of its own: 16 MuJoCo envs on a 2-core machine are
17 processes and 32 pipe messages per step. Here the N sub-envs are split into k contiguous shares, as the
PettingZoo copies are (:class:`shell.envs.pettingzoo.copies.AsyncCopies`): this process steps share 0 while
k - 1 worker processes (:class:`shell.workers.WorkerPool`) step the others, each share a gymnasium
``SyncVectorEnv`` of its sub-envs. Every sub-env is built, seeded, stepped and reset exactly as in one
``SyncVectorEnv`` of all N. Each share merges its sub-envs' infos where it is stepped, with gymnasium's own
``VectorEnv._add_info`` at each sub-env's index in the whole, and the shares' infos are then joined in order
(:func:`merge_infos`), which is what one ``SyncVectorEnv`` calling ``_add_info`` for every sub-env in turn
builds. So a run gives the same numbers as with ``"sync"`` (tests/integration/test_shards.py).

With ``env.vectorization_mode = "threads"`` the other shares are stepped by threads of this process
(:class:`ThreadShares`) instead: no pipe and no pickling. Python runs one
thread at a time, so this pays only for envs whose step spends most of its time in code that releases the GIL:
MuJoCo's ``mj_step`` does, and it is most of a MuJoCo env's step (bench/BENCHMARKS.md, "Sub-envs in threads").
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from copy import deepcopy
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space, concatenate, create_empty_array, iterate

from shell.workers import WorkerPool, split


class ShareError(RuntimeError):
    """A share's sub-env raised in a worker process, or a worker ended; the message is one line."""


class _WholeInfos:
    """What gymnasium's ``VectorEnv._add_info`` reads of its ``self``: the whole env's ``num_envs`` (the length of
    every info array), and itself for the nested dicts."""

    _add_info = gym.vector.VectorEnv._add_info

    def __init__(self, num_envs: int):
        self.num_envs = num_envs


class _ShareSyncVectorEnv(gym.vector.SyncVectorEnv):
    """A ``SyncVectorEnv`` of sub-envs ``offset, offset + 1, ...`` of a whole of ``whole`` sub-envs, whose infos
    are the whole's: gymnasium's own ``_add_info`` puts each sub-env's info at its index in the whole, into
    arrays of the whole's length, so a share's infos are merged where it is stepped (in its thread or process)."""

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], offset: int, whole: int):
        super().__init__(env_fns, copy=False, autoreset_mode=AutoresetMode.SAME_STEP)
        self.offset, self.whole = offset, _WholeInfos(whole)

    def _add_info(self, vector_infos: dict, env_info: dict, env_num: int) -> dict:
        return self.whole._add_info(vector_infos, env_info, self.offset + env_num)


def merge_infos(whole: dict, share: dict, part: range) -> dict:
    """Add a later share's infos to ``whole`` (both of the whole's length; ``share`` set only at ``part``), as if
    gymnasium's ``_add_info`` had gone on with the share's sub-envs: an array (or ``_key`` mask) that ``whole``
    has takes the share's rows, a new key is appended with the share's array, a dict is merged the same way."""
    rows = slice(part.start, part.stop)
    for key, value in share.items():
        if isinstance(value, dict):
            whole[key] = merge_infos(whole.get(key, {}), value, part)
        elif key in whole:
            whole[key][rows] = value[rows]
        else:
            whole[key] = value
    return whole


class Share:
    """One share's sub-envs, stepped in turn; its methods answer with plain data for the pipe: the share's
    batched observations, rewards, terminations and truncations, and its infos as the whole's
    (:class:`_ShareSyncVectorEnv`).
    """

    def __init__(self, env_fns: Sequence[Callable[[], gym.Env]], offset: int, whole: int):
        self.env = _ShareSyncVectorEnv(env_fns, offset, whole)

    def step(self, actions: Any) -> tuple:
        return self.env.step(actions)

    def reset(self, seeds: list[int | None], options: dict | None) -> tuple:
        return self.env.reset(seed=seeds, options=options)

    def call(self, name: str, args: tuple, kwargs: dict) -> tuple:
        return self.env.call(name, *args, **kwargs)

    def set_attr(self, name: str, values: list) -> None:
        self.env.set_attr(name, values)

    def render(self) -> tuple:
        return self.env.render()

    def close(self) -> None:
        self.env.close()


def _serve(env_fn: Callable[[], gym.Env], part: range, whole: int) -> Share:
    """A worker's share: sub-envs ``part`` of ``whole`` of ``env_fn`` (:class:`shell.workers.WorkerPool` calls its
    methods)."""
    return Share([env_fn] * len(part), part.start, whole)


class ThreadShares:
    """Shares stepped by threads of this process, with the request interface of :class:`shell.workers.WorkerPool`
    (``send``, then ``receive`` the answer): share ``i`` is ``serve(*args[i])``, and its calls run in order on a
    thread of its own. A call that raises reaches :meth:`receive`'s caller as it is.

    Args:
        serve: makes a share's object; called here, once per share, in order.
        args: one tuple of arguments to ``serve`` per share.
        name: names the threads.
    """

    def __init__(self, serve: Callable[..., Any], args: Sequence[tuple], name: str = "share"):
        self.processes: list = []  # none: no process to report as ended
        self._objs: list[Any] = []
        self._threads: list[ThreadPoolExecutor] = []
        self._futures: list[Future | None] = []
        try:
            for i, share_args in enumerate(args):
                self._objs.append(serve(*share_args))
                self._threads.append(ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"{name}-{i}"))
                self._futures.append(None)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self._objs)

    def send(self, index: int, method: str, *args: Any) -> None:
        """Start ``obj.method(*args)`` on share ``index``'s thread; returns at once."""
        self._futures[index] = self._threads[index].submit(getattr(self._objs[index], method), *args)

    def receive(self, index: int, error: type[Exception], what: str) -> Any:
        """Share ``index``'s answer to its last :meth:`send` (waits for it); what the call raised, as it is.
        ``error`` and ``what`` are :class:`shell.workers.WorkerPool`'s, unused: nothing crosses a pipe here."""
        future, self._futures[index] = self._futures[index], None
        assert future is not None, "receive without send"
        return future.result()

    def close(self) -> None:
        """Wait for the calls under way, then close every share; never raises; closing twice is harmless."""
        for thread in self._threads:
            thread.shutdown(wait=True)
        for obj in self._objs:
            try:
                obj.close()
            except Exception:
                pass
        self._objs, self._threads, self._futures = [], [], []


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
        threads: step the other shares in threads of this process (:class:`ThreadShares`), not in worker
            processes.
        spec: the vector env's spec (``gymnasium.make_vec``'s), or None.
        name: the env's name in messages.

    Raises:
        ShareError: one line naming the env: a worker could not make its sub-envs, or (from ``step``, ``reset``,
            ``call``, ``set_attr`` and ``render``) a worker's sub-env raised or the worker ended. What this
            process's own share raises reaches the caller as it is.
    """

    def __init__(self, env_fn: Callable[[], gym.Env], num_envs: int, shares: int, spec: Any = None,
                 name: str = "env", threads: bool = False):
        super().__init__()
        self.parts = split(num_envs, shares)
        self.name = name
        self.local = Share([env_fn] * len(self.parts[0]), 0, num_envs)
        self.pool: WorkerPool | ThreadShares | None = None
        try:
            share_args = [(env_fn, part, num_envs) for part in self.parts[1:]]
            if threads:
                self.pool = ThreadShares(_serve, share_args, name="ppo-core-share")
            else:
                self.pool = WorkerPool(_serve, share_args, name="ppo-core-share")
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

    def _merge(self, answers: list[Any], obs_at: int, infos_at: int) -> tuple[Any, dict]:
        """The whole's observations (the shares' rows, in order, into one batch) and infos (the first share's,
        with each later share's merged in: :func:`merge_infos`)."""
        infos: dict | None = None
        arrays = isinstance(self._observations, np.ndarray)  # Box, Discrete, ...: the rows are array slices
        for part, space, answer in zip(self.parts, self._share_spaces, answers, strict=True):
            if answer is None:
                continue
            if arrays:
                self._observations[part.start:part.stop] = answer[obs_at]
            else:
                for i, row in enumerate(iterate(space, answer[obs_at])):
                    self._rows[part.start + i] = row
            infos = answer[infos_at] if infos is None else merge_infos(infos, answer[infos_at], part)
        if not arrays:
            self._observations = concatenate(self.single_observation_space, self._rows, self._observations)
        return deepcopy(self._observations), infos if infos is not None else {}

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
