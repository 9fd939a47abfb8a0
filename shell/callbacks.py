"""What a callback of ``train()`` may be given besides the metrics row: a :class:`CallbackContext`, the
handle for curricula (changing the envs as training goes).

    def harder(row, ctx):                         # callback(row) keeps working; a required second one gets this
        if row["eval_return"] != "" and row["eval_return"] >= 90:
            ctx.env.set_attr("difficulty", 2)     # every training sub-env (of every rank)
            ctx.eval_env.set_attr("difficulty", 2)  # and the envs of every later evaluation

- Callbacks that take a context run on **every rank** under torchrun (with rank 0's row, which holds the
  periodic ``eval_return``), so that all ranks change their envs alike; callbacks of the row alone run on
  rank 0 only, as before.
- A callback object with ``state_dict()`` and ``load_state_dict(state)`` has its state saved in every
  checkpoint (plain data: numbers, strings, lists, dicts, tensors) and restored on ``--resume``
  (``shell.resume(..., callbacks=[the same objects, in the same order])``): a level chosen from an
  evaluation cannot be recomputed from the step count. One with ``on_train_start(ctx)`` is called on every
  rank before the first rollout of a run and of each resume, to apply such restored state to the new envs.
- Only gymnasium vector envs have sub-envs to set attributes on; the ale, envpool, torch-native and
  pettingzoo backends refuse in one line (:class:`shell.errors.ConfigError`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs
import gymnasium as gym

from shell.config import Config
from shell.envs.base import LaneEnv
from shell.errors import ConfigError


def takes_context(callback: Callable[..., Any]) -> bool:
    """True when ``callback``'s second positional parameter is required, or it takes ``*args``: it is then
    called as ``callback(row, ctx)``. A second parameter with a default (``def report(row, index=0)``,
    as callbacks written before contexts existed may have) keeps ``callback(row)``."""
    try:
        parameters = list(inspect.signature(callback).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature: called with the row alone
        return False
    positional = [p for p in parameters if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2:
        return positional[1].default is inspect.Parameter.empty
    return any(p.kind == p.VAR_POSITIONAL for p in parameters)


class TrainEnv:
    """The training env of this process, for callbacks: ``call``, ``get_attr`` and ``set_attr`` on every
    sub-env, through the env contract (:class:`shell.envs.base.LaneEnv`; on gymnasium they reach through the
    sub-envs' wrappers).

    Raises (each method):
        ConfigError: the backend has no gymnasium sub-envs (ale, envpool, torch, pettingzoo), in one line.
    """

    def __init__(self, env: LaneEnv):
        self._env = env

    @property
    def num_envs(self) -> int:
        """Sub-envs in this process (``env.num_envs``)."""
        return self._env.copies

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Call method ``name`` of every sub-env (or read attribute ``name``); one result per sub-env."""
        return self._env.call(name, *args, **kwargs)

    def get_attr(self, name: str) -> tuple[Any, ...]:
        """Attribute ``name`` of every sub-env."""
        return self._env.get_attr(name)

    def set_attr(self, name: str, values: Any) -> None:
        """Set attribute ``name`` on every sub-env: one value for all, or a list of ``num_envs`` values."""
        self._env.set_attr(name, values)


class EvalEnv:
    """The evaluation env, for callbacks. Each evaluation builds its envs anew, so a change is recorded
    here and applied to every sub-env of every later evaluation (periodic and final) when it is built,
    before its first reset."""

    def __init__(self) -> None:
        self.attrs: dict[str, Any] = {}
        self.calls: list[tuple[str, tuple[Any, ...], dict[str, Any]]] = []

    def set_attr(self, name: str, value: Any) -> None:
        """Set attribute ``name`` to ``value`` on the sub-envs of every later evaluation."""
        self.attrs[name] = value

    def call(self, name: str, *args: Any, **kwargs: Any) -> None:
        """Call method ``name`` with these arguments on the sub-envs of every later evaluation (in order)."""
        self.calls.append((name, args, kwargs))

    def wrappers(self) -> list[Callable[[gym.Env], gym.Env]]:
        """The sub-env wrapper that applies the recorded changes ([] while there are none)."""
        if not self.attrs and not self.calls:
            return []
        attrs_, calls = dict(self.attrs), list(self.calls)

        def apply(env: gym.Env) -> gym.Env:
            for name, value in attrs_.items():
                env.set_wrapper_attr(name, value)
            for name, args, kwargs in calls:
                env.get_wrapper_attr(name)(*args, **kwargs)
            return env

        return [apply]


@attrs.frozen
class CallbackContext:
    """The second argument of a callback that takes two (see the module docstring).

    Attributes:
        env: this process's training vector env (:class:`TrainEnv`).
        eval_env: the envs of later evaluations (:class:`EvalEnv`).
        update: updates finished (0 in ``on_train_start`` of a new run).
        env_steps: env steps taken so far, over all ranks.
        config: the run's resolved config.
        run_dir: the run's folder.
        rank: this process's rank (0 without torchrun).
        world_size: the number of processes.
    """

    env: TrainEnv
    eval_env: EvalEnv
    update: int
    env_steps: int
    config: Config
    run_dir: Path
    rank: int = 0
    world_size: int = 1


def callback_states(callbacks: list[Any]) -> list[Any]:
    """``state_dict()`` of each callback that has one (None for the others), in order, for a checkpoint."""
    return [cb.state_dict() if callable(getattr(cb, "state_dict", None)) else None for cb in callbacks]


def load_callback_states(callbacks: list[Any], states: list[Any]) -> None:
    """Give each callback its state from a checkpoint (:func:`callback_states`).

    Raises:
        ConfigError: the checkpoint holds a state for a callback position that is missing or has no
            ``load_state_dict`` (resume with the same callbacks, in the same order).
    """
    for i, state in enumerate(states or []):
        if state is None:
            continue
        target = callbacks[i] if i < len(callbacks) else None
        if not callable(getattr(target, "load_state_dict", None)):
            raise ConfigError(f"the checkpoint holds the state of callback {i} ({len(states)} callbacks in all); "
                              "resume with the same callbacks, in the same order")
        target.load_state_dict(state)
