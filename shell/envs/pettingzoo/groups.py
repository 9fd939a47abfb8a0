"""The agents of a PettingZoo env and their groups: a Parallel-API check, and the default groups and their check
(:mod:`shell.envs.groups`, shared with the other multi-agent backends; re-exported here).

A group is one lane (:class:`shell.envs.base.LaneSpec`): one policy serves its agents, so they share their
observation and action spaces.
"""

from __future__ import annotations

from typing import Any

from shell.envs.groups import check_groups, default_groups
from shell.errors import ConfigError

__all__ = ["check_groups", "check_parallel", "default_groups"]


def check_parallel(env: Any, name: str) -> None:
    """Refuse what is not a Parallel-API env (the backend wraps an AEC env in a
    :class:`shell.envs.pettingzoo.turns.TurnGame` before it gets here)."""
    if hasattr(env, "agent_iter") or hasattr(env, "agent_selection"):
        raise ConfigError(f"env {name!r} is an AEC (turn-based) env that reached the parallel path unwrapped; "
                          "make it through env.backend = 'pettingzoo' (env.id or a factory), which plays it turn "
                          "by turn")
    if not (hasattr(env, "possible_agents") and callable(getattr(env, "step", None))):
        raise ConfigError(f"env {name!r} is a {type(env).__name__}, not a PettingZoo ParallelEnv "
                          "(possible_agents, reset, step)")
