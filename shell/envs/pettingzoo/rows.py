"""One group's agents in the N copies as rows (:class:`GroupRows`): their validity, action masks, episode
statistics and the observation each row sees (its own, the agent's one-hot index, the critic's part; see
:mod:`shell.envs.pettingzoo`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from gymnasium import spaces

from shell.actions import action_row, to_env_action
from shell.config import EnvConfig, PolicyConfig
from shell.envs import masks
from shell.envs.base import StepResult, check_action_space
from shell.errors import ConfigError, TrainingError, space_text
from shell.observations import ACTOR_KEY, AGENT_ID_KEY, CRITIC_KEY, ObservationError, agent_view, obs_layout, to_tensor

if TYPE_CHECKING:
    from shell.envs.pettingzoo.vector import ParallelVecEnv

CRITICS = ("local", "state", "concat")
#: the mask conventions a PettingZoo env does not offer, with the rest of their refusal (shell.envs.masks)
MASK_REFUSALS = {"method": "is for gymnasium envs; a PettingZoo env gives masks in each agent's observation ('obs') "
                           "or info ('info')"}


class GroupRows:
    """One group's agents in the N copies as ``N * M`` rows: what that group's policy, storage and collector see.

    It holds what the group's lane (:class:`shell.envs.base.LaneSpec`, :class:`shell.envs.base.Rows`) is made
    of: ``num_envs`` (the rows), ``observation_space`` / ``action_space`` (one agent's, as the policy sees it),
    ``valid [N*M]`` and ``action_mask``; resets and steps are the copies', all groups together
    (:class:`shell.envs.pettingzoo.vector.ParallelVecEnv`: ``reset``, ``step``). Also ``agents`` (the group's,
    in row order), ``rows_per_env = M`` and ``copies = N``.
    """

    def __init__(self, parent: ParallelVecEnv, group: str, agents: list[str], cfg: EnvConfig, policy: PolicyConfig):
        self.parent, self.group, self.agents = parent, group, list(agents)
        first = parent.probe
        M, N = len(self.agents), parent.copies
        self.rows_per_env, self.copies, self.num_envs = M, N, N * M
        self.device = parent.device
        agent_obs = first.observation_space(self.agents[0])
        self.action_space = first.action_space(self.agents[0])
        check_action_space(self.action_space)
        self._mask_size = masks.mask_size(self.action_space)
        self.mask_source = masks.resolve_source(cfg.action_mask, self.action_space, agent_obs, refused=MASK_REFUSALS,
                                                observation="each agent's observation space")
        self._own_space = masks.without_mask_key(agent_obs) if self.mask_source == "obs" else agent_obs
        self.agent_id, self.critic = policy.agent_id, policy.critic
        self.observation_space = self._view_space(self._own_space)
        self.layout = obs_layout(self.observation_space)
        # per row: alive (acts on the last returned observation), its last raw observation (None while it is not
        # alive: a gone agent observes zeros, and is zeros in a concat critic's input), its mask
        self._alive = np.zeros(self.num_envs, dtype=bool)
        # per row: its seat is to move (a turn-based game, copy_turn); always true in a parallel env
        self._turn = np.ones(self.num_envs, dtype=bool)
        self._obs: list[Any] = [None] * self.num_envs
        self._mask_rows = np.ones((self.num_envs, self._mask_size or 0), dtype=bool)
        self._unseen = False  # "auto" settled without an agent of the group at the first reset
        self._mask: torch.Tensor | None = None
        self._return = np.zeros(N, dtype=np.float64)  # the group's return in each copy's running episode
        self._action: np.ndarray | None = None

    @property
    def max_episode_steps(self) -> int | None:
        return self.parent.max_episode_steps

    # -- spaces
    def _view_space(self, own: Any) -> Any:
        M = self.rows_per_env
        one_hot = spaces.Box(0.0, 1.0, (M,), np.float32)
        actor = own
        if self.agent_id:
            if isinstance(own, spaces.Dict):
                actor = spaces.Dict({**own.spaces, AGENT_ID_KEY: one_hot})
            elif isinstance(own, spaces.Box) and len(own.shape) == 1:
                actor = spaces.Box(np.concatenate([own.low, one_hot.low]).astype(np.float32),
                                   np.concatenate([own.high, one_hot.high]).astype(np.float32), dtype=np.float32)
            else:
                raise ConfigError(f"policy.agent_id needs a 1-D Box or a Dict observation; the agents of group "
                                  f"{self.group!r} observe {space_text(own)}")
        if self.critic == "local":
            return actor
        if not (isinstance(actor, spaces.Box) and len(actor.shape) == 1):
            raise ConfigError(f"policy.critic = {self.critic!r} needs 1-D Box observations; the agents of group "
                              f"{self.group!r} observe {space_text(own, 60)}")
        size = self.parent.state_size if self.critic == "state" else M * int(own.shape[0])
        critic = spaces.Box(-np.inf, np.inf, (size + M,), np.float32)
        return spaces.Dict({ACTOR_KEY: actor, CRITIC_KEY: critic})

    # -- the interface
    @property
    def valid(self) -> torch.Tensor:
        """``[N*M]`` bool: the rows whose agent acts on the last returned observation (in a turn-based game:
        the seat to move; the others are in the game and receive rewards and dones, but do not act)."""
        return torch.as_tensor(self._acting(), device=self.device)

    def _acting(self) -> np.ndarray:
        return self._alive & self._turn

    @property
    def action_mask(self) -> torch.Tensor | None:
        """``[N*M, A]`` bool: the legal actions of the last returned observation (all true where not valid)."""
        return self._mask

    # -- the parent's hooks, per copy i
    def copy_reset(self, i: int, obs: dict, infos: dict, present: set[str], at_reset: bool,
                   mover: str | None = None) -> None:
        """Copy i was reset; ``mover`` is the seat to move first in a turn-based game (None: a parallel env)."""
        self._return[i] = 0.0
        for j, agent in enumerate(self.agents):
            r = i * self.rows_per_env + j
            self._alive[r] = agent in present and agent in obs
            self._obs[r] = obs[agent] if self._alive[r] else None
        self.copy_turn(i, mover)
        self.read_masks(i, obs, infos, at_reset)

    def copy_turn(self, i: int, mover: str | None) -> None:
        """Whose turn it is in copy i: only ``mover``'s row acts (None: every agent there, a parallel env)."""
        M = self.rows_per_env
        self._turn[i * M:(i + 1) * M] = [mover is None or agent == mover for agent in self.agents]

    def copy_actions(self, i: int) -> dict[str, Any]:
        """The actions of copy i's acting agents of this group (those of gone agents, and of seats whose turn it
        is not, are never sent)."""
        M = self.rows_per_env
        acting = self._acting()
        return {agent: action_row(self._action, i * M + j) for j, agent in enumerate(self.agents) if acting[i * M + j]}

    def read_masks(self, i: int, obs: dict, infos: dict, at_reset: bool) -> None:
        """Keep copy i's masks (all true for rows that are not valid, a gone agent or a seat whose turn it is not:
        their action is ignored, and a classic game's all-false mask of a waiting seat is never read)."""
        # "auto": the first reset decides whether infos carry masks: an info of the group that holds one (a game
        # may give it to the seat to move only), else the first agent's
        M = self.rows_per_env
        first = None
        if self.mask_source == masks.PENDING_INFO:
            seen = [infos[a] for a in self.agents if a in infos]
            first = next((info for info in seen if info and masks.MASK_KEY in info), seen[0] if seen else None)
            to_move = any(self._acting()[i * M + j] and a in infos for j, a in enumerate(self.agents))
            if first is None or (masks.MASK_KEY not in first and not to_move):
                self._unseen = True  # "no masks", decided with no seat of the group to move: refused below if its
                # agents show masks later
        elif self._unseen and any(masks.MASK_KEY in (infos.get(a) or {}) for a in self.agents):
            raise ConfigError(f"env {self.parent.name}: no agent of group {self.group!r} was to move at the first "
                              "reset, so env.action_mask = 'auto' found no masks, but its agents' info holds "
                              f"{masks.MASK_KEY!r}: set env.action_mask = 'info'")
        try:
            source = self.mask_source = masks.settle_source(self.mask_source, first, self.action_space,
                                                            self._own_space)
        except masks.MaskError as exc:  # a near miss: only "auto" at the first reset gets here
            raise masks.env_error(exc, self.parent.name, at_reset, self.parent.steps) from None
        if source is None:
            return
        acting = self._acting()
        for j, agent in enumerate(self.agents):
            r = i * M + j
            self._mask_rows[r] = self._agent_mask(i, agent, source, obs, infos, at_reset) if acting[r] else True

    def _agent_mask(self, i: int, agent: str, source: str, obs: dict, infos: dict, at_reset: bool) -> np.ndarray:
        """The ``[A]`` bool mask of agent ``agent`` of copy i, read and checked (shell.envs.masks)."""
        steps = self.parent.steps
        try:
            raw = masks.read_mask(source, obs[agent] if source == "obs" else None, infos.get(agent) or {},
                                  whose_info=f"the info of agent {agent!r}", action_space=self.action_space)
            mask = masks.check_mask(np.asarray(raw)[None], 1, self.action_space,
                                    row=lambda _: f"agent {agent!r} of copy {i}", where=masks.moment(at_reset, steps))
        except masks.MaskError as exc:
            raise masks.env_error(exc, self.parent.name, at_reset, steps) from None
        return mask[0]

    def observation(self, rows_obs: list[Any] | None = None, states: list[np.ndarray | None] | None = None) -> Any:
        """The rows' observations as the policy sees them (see :mod:`shell.envs.pettingzoo`), as tensors.

        Args:
            rows_obs: each row's raw observation ``[N*M]``; None = the last returned ones.
            states: each copy's env state ``[N]`` for ``policy.critic = "state"``; None = the current ones.
        """
        rows_obs = self._obs if rows_obs is None else rows_obs
        states = self.parent.states if states is None else states
        M, N = self.rows_per_env, self.copies
        own_space = self._own_space
        if isinstance(own_space, spaces.Dict):
            own: Any = {k: np.stack([self._own_part(o, k) for o in rows_obs]) for k in own_space.spaces}
        else:
            own = np.stack([self._own_part(o, None) for o in rows_obs])
        ids = np.tile(np.eye(M, dtype=np.float32), (N, 1))
        critic = None
        if self.critic != "local":
            shared = np.stack(states) if self.critic == "state" else own.reshape(N, -1)
            critic = np.concatenate([np.repeat(shared.astype(np.float32, copy=False), M, axis=0), ids], axis=1)
        try:
            return to_tensor(agent_view(own, ids if self.agent_id else None, critic), self.layout, self.device)
        except ObservationError as exc:  # the env's own fault: exit 1 with one line, as for an env that raises
            raise TrainingError(f"env {self.parent.name}: {exc} (at vector step {self.parent.steps})") from None

    def _own_part(self, obs: Any, key: str | None) -> np.ndarray:
        """One row's own observation (or its Dict part ``key``), zeros for a row whose agent is gone."""
        space = self._own_space if key is None else self._own_space.spaces[key]
        if obs is None:  # zeros; a Discrete that starts elsewhere holds no 0: its start
            return np.full(space.shape, getattr(space, "start", 0) if isinstance(space, spaces.Discrete) else 0,
                           dtype=space.dtype)
        part = obs if key is None else obs[key]
        return np.asarray(part, dtype=space.dtype).reshape(space.shape)

    def begin_step(self, action: torch.Tensor) -> None:
        self._action = to_env_action(action, self.action_space)
        R = self.num_envs
        self._reward = np.zeros(R, dtype=np.float32)
        self._terminated = np.zeros(R, dtype=bool)
        self._truncated = np.zeros(R, dtype=bool)
        self._final_rows: list[Any] = list(self._obs)
        self._start = np.zeros(R, dtype=bool)
        self._episode = (np.zeros(R, dtype=bool), np.zeros(R, dtype=np.float32), np.zeros(R, dtype=np.int64))

    def copy_step(self, i: int, obs: dict, rewards: dict, terms: dict, truncs: dict, present: set[str]) -> None:
        """Record copy i's step for this group's rows (before the copy resets, if it does)."""
        for j, agent in enumerate(self.agents):
            r = i * self.rows_per_env + j
            if self._alive[r]:
                self._reward[r] = float(rewards.get(agent, 0.0))
                self._terminated[r] = bool(terms.get(agent, False))
                self._truncated[r] = bool(truncs.get(agent, False)) and not self._terminated[r]
                if agent in obs:
                    self._obs[r] = obs[agent]
                self._final_rows[r] = self._obs[r]
                self._return[i] += self._reward[r]
                if self._terminated[r] or self._truncated[r] or agent not in present:
                    self._alive[r] = False
                    # dropped without a flag: its episode ended there
                    self._terminated[r] = self._terminated[r] or not self._truncated[r]
                    self._obs[r] = None  # gone: zeros until its copy resets (its final observation is kept)
            elif agent in present and agent in obs:  # an agent that joins: its own episode starts
                self._alive[r] = True
                self._obs[r] = obs[agent]
                self._start[r] = True

    def copy_ended(self, i: int, length: int) -> None:
        """Copy i's episode is over (it resets next): report the group's return once, on the copy's first row."""
        r = i * self.rows_per_env
        done, ret, steps = self._episode
        done[r], ret[r], steps[r] = True, self._return[i], length
        self._start[r:r + self.rows_per_env] = True

    def end_step(self, final_states: list[np.ndarray | None]) -> StepResult:
        """This step's :class:`shell.envs.base.StepResult` of the group's rows, after the copies that ended have
        reset. ``final_states`` are the env states of the step (before those resets): a truncated row's final
        observation carries the state of the step that ended its episode (``policy.critic = "state"``)."""
        final_obs = self.observation(self._final_rows, final_states) if self._truncated.any() else None
        obs = self.reset_observation()
        dev = self.device
        done, ret, steps = self._episode
        return StepResult(obs=obs, reward=torch.as_tensor(self._reward, device=dev),
                          valid=self.valid, action_mask=self.action_mask,
                          ended=torch.as_tensor(done.reshape(self.copies, self.rows_per_env)[:, 0], device=dev),
                          terminated=torch.as_tensor(self._terminated, device=dev),
                          truncated=torch.as_tensor(self._truncated, device=dev), final_obs=final_obs,
                          episode_done=torch.as_tensor(done, device=dev),
                          episode_return=torch.as_tensor(ret, device=dev),
                          episode_length=torch.as_tensor(steps, device=dev),
                          episode_start=torch.as_tensor(self._start, device=dev))

    def reset_observation(self) -> Any:
        """The rows' observations after a reset or a step, with their masks kept for :attr:`action_mask`."""
        obs = self.observation()
        if self._mask_size is not None and self.mask_source is not None:
            self._mask = torch.as_tensor(self._mask_rows.copy(), device=self.device)
        return obs
