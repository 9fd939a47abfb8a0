"""The agents of a multi-agent env in groups: the default groups (agents with identical spaces) and the check of
the groups a config names (``env.groups``), for every multi-agent backend (pettingzoo, vmas).

A group is one lane (:class:`shell.envs.base.LaneSpec`): one policy serves its agents, so they share their
observation and action spaces.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from shell.errors import ConfigError, clipped, space_text


def default_groups(agents: list[str], obs_space: Callable[[str], Any],
                   act_space: Callable[[str], Any]) -> dict[str, list[str]]:
    """Agents with identical observation and action spaces, in ``possible_agents`` order, one group each
    set; a group is named by its agents' common name before ``_<index>`` (``adversary_0`` -> ``adversary``)."""
    by_spaces: dict[tuple[str, str], list[str]] = {}
    for agent in agents:
        by_spaces.setdefault((repr(obs_space(agent)), repr(act_space(agent))), []).append(agent)
    groups: dict[str, list[str]] = {}
    for members in by_spaces.values():
        stems = {re.sub(r"_?\d+$", "", a) for a in members}
        name = stems.pop() if len(stems) == 1 and "" not in stems else members[0]
        while name in groups:
            name += "_"
        groups[name] = members
    return groups


def check_groups(groups: dict[str, list[str]], agents: list[str], obs_space: Callable[[str], Any],
                 act_space: Callable[[str], Any], name: str) -> None:
    """Groups must cover every agent once, and agree on spaces inside a group.

    Raises:
        ConfigError: one line naming the agent or the group.
    """
    seen: dict[str, str] = {}
    for group, members in groups.items():
        if not members:
            raise ConfigError(f"env.groups.{group} is empty")
        for agent in members:
            if agent not in agents:
                raise ConfigError(f"env.groups.{group} names {agent!r}, which env {name!r} does not have; its "
                                  f"agents: {agents}")
            if agent in seen:
                raise ConfigError(f"env.groups names {agent!r} in both {seen[agent]!r} and {group!r}")
            seen[agent] = group
        first = members[0]
        for agent in members[1:]:
            for what, space in (("observation", obs_space), ("action", act_space)):
                if repr(space(agent)) != repr(space(first)):
                    theirs, mine = space_text(space(agent), 32), space_text(space(first), 32)
                    raise ConfigError(f"env.groups.{clipped(group, 16)}: {clipped(repr(agent), 16)} and "
                                      f"{clipped(repr(first), 16)} differ in {what} space ({theirs} vs {mine}); "
                                      "split them")
    missing = [a for a in agents if a not in seen]
    if missing:
        raise ConfigError(f"env.groups leave out {missing}; every agent of env {name!r} needs a group")
