"""The lane env of the PettingZoo backend (:class:`ParallelVecEnv`): N copies of a Parallel-API env, a lane per
group of agents (:class:`shell.envs.pettingzoo.rows.GroupRows`), all groups acting in one joint step of the
copies (:mod:`shell.envs.pettingzoo.copies`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from shell.config import EnvConfig, PolicyConfig
from shell.envs import masks
from shell.envs.base import LaneSpec, Rows, StepResult, no_sub_envs
from shell.envs.pettingzoo.copies import SyncCopies
from shell.envs.pettingzoo.groups import check_groups, check_parallel, default_groups
from shell.envs.pettingzoo.rows import GroupRows
from shell.envs.pettingzoo.turns import TurnGame
from shell.errors import ConfigError, TrainingError, first_line
from shell.seeding import ResetSeed, per_copy


def _max_cycles(env: Any) -> int | None:
    """An env's own episode length limit where it keeps one as ``max_cycles`` (MPE, butterfly)."""
    for obj in (env, getattr(env, "unwrapped", None), getattr(env, "aec_env", None)):
        value = getattr(obj, "max_cycles", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


class ParallelVecEnv:
    """N copies of a PettingZoo ``ParallelEnv``, or of a turn-based game (:class:`TurnGame`, one move per step: only
    the seat to move has a valid row); its agents in groups (:attr:`groups`, :class:`GroupRows`).

    A :class:`shell.envs.base.LaneEnv` with a lane per group: :meth:`reset` returns ``{group: Rows}`` and
    :meth:`step` takes ``{group: action}``: all groups act in the same joint step. Copy i is seeded
    ``seed + i`` at a reset; a copy whose last agent is done resets in the same step (SAME_STEP).

    Args:
        probe: a copy that answers for the spaces (one of the copies, or one more).
        make_copies: ``make_copies(with_state)`` -> the N copies (:mod:`shell.envs.pettingzoo.copies`).
        copies: N.
        cfg: the env config (``groups``, ``action_mask``, ``max_episode_steps``).
        device: where the tensors go.
        policy: the policy config (``agent_id``, ``critic``); None = the defaults.
        name: the env's name for messages.

    Raises:
        ConfigError: an AEC env not wrapped in a :class:`TurnGame`, groups that do not cover every agent or mix
            spaces, an unsupported space, ``critic = "state"`` on an env without ``state()``, or a mask
            convention that finds no mask.
    """

    def __init__(self, probe: Any, make_copies: Callable[[bool], Any], copies: int, cfg: EnvConfig,
                 device: torch.device, policy: PolicyConfig | None = None, name: str | None = None):
        name = name or type(probe).__name__  # make passes env.id, from_factory the factory's name
        self.probe, self.name, self.device = probe, name, device
        #: a turn-based game (copies of :class:`TurnGame`): only the seat to move acts
        self.turns = isinstance(probe, TurnGame)
        self.copies = copies
        self.steps = 0
        self.copy_envs: Any = None  # SyncCopies or AsyncCopies, made once the config is checked
        policy = policy or PolicyConfig()
        first = probe
        self.states: list[np.ndarray | None] = [None] * copies
        self.state_size = 0
        try:
            check_parallel(first, name)
            agents = list(first.possible_agents)
            groups = {g: list(m) for g, m in cfg.groups.items()} if cfg.groups else \
                default_groups(agents, first.observation_space, first.action_space)
            check_groups(groups, agents, first.observation_space, first.action_space, name)
            self._state = policy.critic == "state"
            if self._state:
                if not callable(getattr(first, "state", None)):
                    raise ConfigError(f"policy.critic = 'state' needs an env with state(); env {name!r} has none "
                                      "(use 'concat' or 'local')")
                first.reset(seed=0)
                try:
                    self.state_size = int(np.asarray(first.state()).size)
                except NotImplementedError:  # pettingzoo.ParallelEnv's own state() raises
                    raise ConfigError(f"policy.critic = 'state' needs an env with state(); env {name!r} does not "
                                      "implement it (use 'concat' or 'local')") from None
            self.groups = {g: GroupRows(self, g, members, cfg, policy) for g, members in groups.items()}
            self.copy_envs = make_copies(self._state)
        except masks.MaskError as exc:
            self.close()
            raise ConfigError(f"env {name!r}: {exc}") from None
        except ConfigError:
            self.close()
            raise
        #: the time limit of one episode: env.max_episode_steps (applied here as a truncation of every agent),
        #: else the env's own max_cycles (MPE's, PettingZoo's butterfly envs), else None
        self.max_episode_steps = cfg.max_episode_steps or _max_cycles(first)
        self._cap = cfg.max_episode_steps
        self._length = np.zeros(self.copies, dtype=np.int64)

    @property
    def lanes(self) -> dict[str, LaneSpec]:
        """A lane per group of agents (:class:`shell.envs.base.LaneSpec`), in the group order."""
        return {g: LaneSpec(rows.observation_space, rows.action_space, rows.num_envs, rows.rows_per_env,
                            list(rows.agents), self.turns) for g, rows in self.groups.items()}

    @property
    def render_fps(self) -> int | None:
        """The frame rate of the env's frames (its metadata's ``render_fps``)."""
        return (getattr(self.probe, "metadata", None) or {}).get("render_fps")

    def mask_sources(self) -> dict[str, str | None]:
        """Where each group's masks come from (settled by the first reset)."""
        return {g: rows.mask_source for g, rows in self.groups.items()}

    def reset(self, seed: ResetSeed | None = None) -> dict[str, Rows]:
        """Reset every copy (copy i seeded ``seed + i``, or ``seed[i]`` for a list: shell/seeding.py): each group's
        :class:`shell.envs.base.Rows`.

        Raises:
            TrainingError: an env raised on reset.
            ConfigError: the first reset finds no mask where one is asked, or a mask of the wrong shape.
        """
        self._reset(dict(enumerate(per_copy(seed, self.copies))), at_reset=True)
        return {g: Rows(rows.reset_observation(), rows.valid, rows.action_mask) for g, rows in self.groups.items()}

    def _copies(self, call: Callable[[], Any], where: str) -> Any:
        """A call into the copies; what an env raises ends training in one line (TrainingError)."""
        try:
            return call()
        except TrainingError:  # a worker's error, already one line
            raise
        except Exception as exc:
            raise TrainingError(f"env {self.name} raised {type(exc).__name__}{where}: {first_line(exc)}") from exc

    def _reset(self, seeds: dict[int, int | None], at_reset: bool = False) -> None:
        outs = self._copies(lambda: self.copy_envs.reset(seeds), " on reset")
        for i, (obs, infos, agents, state, mover) in outs.items():
            self._length[i] = 0
            self.states[i] = state
            for rows in self.groups.values():
                rows.copy_reset(i, obs, infos, set(agents), at_reset, mover)

    def step(self, actions: dict[str, torch.Tensor]) -> dict[str, StepResult]:
        """One joint step of every copy: each group's ``[N*M_g]`` actions (those of rows that are not valid are
        never sent) -> each group's :class:`StepResult`, with the ``valid`` rows, the ``action_mask`` of its
        ``obs`` and the copies whose episode ``ended``. A copy whose last agent is done resets (SAME_STEP).

        Raises:
            TrainingError: an env raised.
        """
        for g, rows in self.groups.items():
            rows.begin_step(actions[g])
        self.steps += 1
        joints = []
        for i in range(self.copies):
            joint: dict[str, Any] = {}
            for rows in self.groups.values():
                joint.update(rows.copy_actions(i))
            joints.append(joint)
        results = self._copies(lambda: self.copy_envs.step(joints), "")
        ended: dict[int, int | None] = {}
        for i, (obs, rewards, terms, truncs, infos, agents, state, mover) in enumerate(results):
            self._length[i] += 1
            if self._cap is not None and self._length[i] >= self._cap and agents:
                # env.max_episode_steps: truncate every agent still there
                truncs = {**truncs, **dict.fromkeys(agents, True)}
                present: set[str] = set()
            else:
                present = set(agents)
            self.states[i] = state
            for rows in self.groups.values():
                rows.copy_step(i, obs, rewards, terms, truncs, present)
            if not present:  # the copy's episode is over: SAME_STEP reset
                for rows in self.groups.values():
                    rows.copy_ended(i, int(self._length[i]))
                ended[i] = None
            else:
                for rows in self.groups.values():
                    rows.copy_turn(i, mover)
                    rows.read_masks(i, obs, infos, at_reset=False)
        # the final observations carry the state of this step, also in the copies that reset now
        final_states = list(self.states)
        if ended:
            self._reset(ended)
        return {g: rows.end_step(final_states) for g, rows in self.groups.items()}

    def render(self) -> Any:
        """Copy 0's frame (``render_mode = "rgb_array"``)."""
        return self.copy_envs.render()

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        raise no_sub_envs("pettingzoo", f"call({name!r})")

    def get_attr(self, name: str) -> Any:
        raise no_sub_envs("pettingzoo", f"get_attr({name!r})")

    def set_attr(self, name: str, values: Any) -> None:
        raise no_sub_envs("pettingzoo", f"set_attr({name!r})")

    def close(self) -> None:
        """Close every copy (and the one that answers for the spaces); never raises."""
        in_copies = isinstance(self.copy_envs, SyncCopies) and any(e is self.probe for e in self.copy_envs.envs)
        for closing in (self.copy_envs, None if in_copies else self.probe):
            try:
                if closing is not None:
                    closing.close()
            except Exception:
                pass
