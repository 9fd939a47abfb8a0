"""The PettingZoo backend: N copies of a Parallel-API multi-agent env as rows of one batch.

``env.backend = "pettingzoo"`` and ``env.id`` names a module with a ``parallel_env(**kwargs)``
function (``"mpe2.simple_spread_v3"``); ``env.kwargs`` are passed to it. From Python, a factory
``Callable[[], pettingzoo.ParallelEnv]`` works too (``shell.train(..., env=factory)`` with this backend).

Rows. The agents are split into groups (``env.groups``; by default agents with identical observation
and action spaces, named by their common prefix, as BenchMARL groups them). A group of M agents in
N copies gives ``N * M`` rows, copy-major: row ``i * M + j`` is agent j of copy i, in the group's fixed
agent order, at every step. Each row is one agent's own PPO sample stream: its reward, its own
termination and truncation flags, and a truncation bootstraps from that agent's final observation.

Agents that come and go. PettingZoo drops an agent from its dicts once it is done; its row is then
not ``valid`` (DESIGN.md, "Rows and the validity mask") until its copy resets, so no transition of a
gone agent reaches GAE, the losses, the normalisers or the episode statistics. A copy resets when
its last agent is done (SAME_STEP: the step that ends the episode returns the reset observations,
and the ended rows' final observations for the bootstrap).

What each row observes (``policy.agent_id``, ``policy.critic``):

- the agent's own observation, with the agent's one-hot index ``[M]`` appended when
  ``policy.agent_id`` (a key ``"agent_id"`` beside a Dict observation's keys);
- with ``policy.critic = "state"`` or ``"concat"`` the observation becomes a Dict of ``"obs"`` (the
  above, all the actor sees) and ``"critic"`` (all the critic sees): the env's global ``state()``, or
  every agent's observation of the group in the group's order (zeros for a gone agent), then the
  agent's one-hot index, since each agent's value differs (its own rewards). These need flat Box
  observations.

Action masks per agent: a Dict observation key ``"action_mask"`` (PettingZoo's classic games) or
``info[agent]["action_mask"]``, by ``env.action_mask`` (``"auto"``, ``"obs"``, ``"info"``, ``"none"``).

Episode statistics are per copy: an episode's return is the sum over the group's agents of each
agent's return (the figure a cooperative task is judged by), its length the copy's steps.
"""

from __future__ import annotations

import importlib
import os
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from shell.actions import to_env_action
from shell.config import EnvConfig, PolicyConfig
from shell.envs import masks
from shell.envs.base import LaneSpec, Rows, StepResult, check_action_space, no_sub_envs, source_name
from shell.errors import ConfigError, TrainingError, first_line
from shell.installation import install_hint
from shell.observations import ACTOR_KEY, AGENT_ID_KEY, CRITIC_KEY, agent_view, obs_layout, to_tensor
from shell.seeding import ResetSeed, per_copy
from shell.workers import WorkerPool

CRITICS = ("local", "state", "concat")
#: the mask conventions a PettingZoo env does not offer, with the rest of their refusal (shell.envs.masks)
MASK_REFUSALS = {"method": "is for gymnasium envs; a PettingZoo env gives masks in each agent's observation ('obs') "
                           "or info ('info')"}


# ----------------------------------------------------------------------------- building
def _factory_from_id(cfg: EnvConfig) -> Callable[[], Any]:
    """``env.id`` -> a function making one parallel env with ``env.kwargs``: ``"module"`` names a module
    with ``parallel_env``; ``"module:name"`` names the function (or class) ``name`` in ``module`` that
    makes a ParallelEnv, used instead of ``parallel_env``.

    Raises:
        ConfigError: the module cannot be imported (naming the multiagent extra for mpe2 and
            pettingzoo), it has no ``name`` (naming both) or ``name`` is not callable, or it has no
            ``parallel_env`` (an AEC-only env: naming ``aec_to_parallel``).
    """
    module_name, colon, attr = cfg.id.partition(":")
    if colon and not attr:
        raise ConfigError(f"env.id {cfg.id!r} names no function after ':'; use 'module' (its parallel_env) "
                          "or 'module:function' (a function of the module that makes a ParallelEnv)")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # a missing package, a misspelt module, or an error inside the module
        top = module_name.split(".")[0]
        if isinstance(exc, ModuleNotFoundError) and exc.name == top and top in ("mpe2", "pettingzoo"):
            raise ConfigError(f"env {cfg.id!r} needs the {top} package; run: {install_hint('multiagent')}") from None
        raise ConfigError(f"env.backend = 'pettingzoo': cannot import {module_name!r} ({type(exc).__name__}: "
                          f"{first_line(exc)}); env.id names an importable module with parallel_env(), e.g. "
                          "'mpe2.simple_spread_v3', or 'module:function' for a function of it that makes a "
                          "ParallelEnv (your own module: put its folder on PYTHONPATH)") from None
    if attr:
        make = getattr(module, attr, None)
        if make is None:
            raise ConfigError(f"env {cfg.id!r}: module {module_name!r} has no {attr!r}; after ':' env.id names "
                              "a function of the module that makes a ParallelEnv")
        if not callable(make):
            raise ConfigError(f"env {cfg.id!r}: {module_name}.{attr} is a {type(make).__name__}, not a function "
                              "that makes a ParallelEnv")
    else:
        make = getattr(module, "parallel_env", None)
    if make is None:
        aec = "; it has an AEC env: wrap it with pettingzoo.utils.conversions.aec_to_parallel and pass the " \
              "factory from Python" if hasattr(module, "env") else ""
        raise ConfigError(f"env {cfg.id!r} has no parallel_env(): env.backend = 'pettingzoo' needs PettingZoo's "
                          f"Parallel API{aec}")
    kwargs = dict(cfg.kwargs)
    return lambda render_mode=None: make(**kwargs, **({"render_mode": render_mode} if render_mode else {}))


def _check_parallel(env: Any, name: str) -> None:
    """Refuse what is not a Parallel-API env (an AEC env gets PettingZoo's converter named)."""
    if hasattr(env, "agent_iter") or hasattr(env, "agent_selection"):
        raise ConfigError(f"env {name!r} is an AEC (turn-based) env; env.backend = 'pettingzoo' needs the Parallel "
                          "API: pettingzoo.utils.conversions.aec_to_parallel(env) converts one whose agents act "
                          "together")
    if not (hasattr(env, "possible_agents") and callable(getattr(env, "step", None))):
        raise ConfigError(f"env {name!r} is a {type(env).__name__}, not a PettingZoo ParallelEnv "
                          "(possible_agents, reset, step)")


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
                    raise ConfigError(f"env.groups.{group}: {agent!r} and {first!r} have different {what} spaces "
                                      f"({space(agent)} and {space(first)}); one policy serves one set of spaces")
    missing = [a for a in agents if a not in seen]
    if missing:
        raise ConfigError(f"env.groups leave out {missing}; every agent of env {name!r} needs a group")


def _max_cycles(env: Any) -> int | None:
    """An env's own episode length limit where it keeps one as ``max_cycles`` (MPE, butterfly)."""
    for obj in (env, getattr(env, "unwrapped", None), getattr(env, "aec_env", None)):
        value = getattr(obj, "max_cycles", None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


# ----------------------------------------------------------------------------- stepping the copies
def _step_copy(env: Any, joint: dict, with_state: bool) -> tuple:
    obs, rewards, terms, truncs, infos = env.step(joint)
    return obs, rewards, terms, truncs, infos, list(env.agents), _state(env) if with_state else None


def _reset_one(env: Any, seed: int | None, with_state: bool) -> tuple:
    obs, infos = env.reset(seed=seed)
    return obs, infos, list(env.agents), _state(env) if with_state else None


def _state(env: Any) -> np.ndarray:
    return np.asarray(env.state(), dtype=np.float32).reshape(-1)


class SyncCopies:
    """The N copies stepped one after another in this process (``env.vectorization_mode = "sync"``)."""

    def __init__(self, envs: list[Any], with_state: bool):
        self.envs, self.with_state = envs, with_state

    def step(self, joints: list[dict]) -> list[tuple]:
        """Each copy's ``(obs, rewards, terms, truncs, infos, agents after, state)`` for its joint action."""
        return [_step_copy(env, joint, self.with_state) for env, joint in zip(self.envs, joints, strict=True)]

    def reset(self, seeds: dict[int, int | None]) -> dict[int, tuple]:
        """Reset the copies named: ``{i: (obs, infos, agents, state)}``."""
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
            share.envs.append(factory(render_mode=render_mode) if render_mode else factory())
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
        shares = max(1, min(copies, shares or os.cpu_count() or 1))
        sizes = [copies // shares + (w < copies % shares) for w in range(shares)]
        starts = [sum(sizes[:w]) for w in range(shares)]
        self.name = name
        self.local = SyncCopies([], with_state)  # share 0: stepped here
        self.local_part = range(0, sizes[0])
        self.slices = [range(starts[w], starts[w] + sizes[w]) for w in range(1, shares)]
        self.pool = WorkerPool(_share, [(factory, size, render_mode, with_state) for size in sizes[1:]],
                               name=f"ppo-core-{name}")
        try:
            for _ in range(sizes[0]):
                try:
                    self.local.envs.append(factory(render_mode=render_mode) if render_mode else factory())
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


# ----------------------------------------------------------------------------- the vector env
class GroupRows:
    """One group's agents in the N copies as ``N * M`` rows: what that group's policy, storage and collector see.

    It holds what the group's lane (:class:`shell.envs.base.LaneSpec`, :class:`shell.envs.base.Rows`) is made
    of: ``num_envs`` (the rows), ``observation_space`` / ``action_space`` (one agent's, as the policy sees it),
    ``valid [N*M]`` and ``action_mask``; resets and steps are the copies', all groups together
    (:meth:`ParallelVecEnv.reset`, :meth:`ParallelVecEnv.step`). Also ``agents`` (the group's, in row order),
    ``rows_per_env = M`` and ``copies = N``.
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
        # per row: alive (acts on the last returned observation), its last raw observation, its mask
        self._alive = np.zeros(self.num_envs, dtype=bool)
        self._obs: list[Any] = [None] * self.num_envs
        self._mask_rows = np.ones((self.num_envs, self._mask_size or 0), dtype=bool)
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
                                  f"{self.group!r} observe {own}")
        if self.critic == "local":
            return actor
        if not (isinstance(actor, spaces.Box) and len(actor.shape) == 1):
            raise ConfigError(f"policy.critic = {self.critic!r} needs 1-D Box observations; the agents of group "
                              f"{self.group!r} observe {own}")
        size = self.parent.state_size if self.critic == "state" else M * int(own.shape[0])
        critic = spaces.Box(-np.inf, np.inf, (size + M,), np.float32)
        return spaces.Dict({ACTOR_KEY: actor, CRITIC_KEY: critic})

    # -- the interface
    @property
    def valid(self) -> torch.Tensor:
        """``[N*M]`` bool: the rows whose agent acts on the last returned observation."""
        return torch.as_tensor(self._alive.copy(), device=self.device)

    @property
    def action_mask(self) -> torch.Tensor | None:
        """``[N*M, A]`` bool: the legal actions of the last returned observation (all true where not valid)."""
        return self._mask

    # -- the parent's hooks, per copy i
    def copy_reset(self, i: int, obs: dict, infos: dict, present: set[str], at_reset: bool) -> None:
        self._return[i] = 0.0
        for j, agent in enumerate(self.agents):
            r = i * self.rows_per_env + j
            self._alive[r] = agent in present and agent in obs
            self._obs[r] = obs.get(agent)
        self.read_masks(i, obs, infos, at_reset)

    def copy_actions(self, i: int) -> dict[str, Any]:
        """The actions of copy i's living agents of this group (those of gone agents are never sent)."""
        M = self.rows_per_env
        return {agent: self._action[i * M + j] for j, agent in enumerate(self.agents) if self._alive[i * M + j]}

    def read_masks(self, i: int, obs: dict, infos: dict, at_reset: bool) -> None:
        """Keep copy i's masks (all true for rows that are not valid: their action is ignored)."""
        # "auto": the first reset decides whether infos carry masks (the first agent's info)
        first = next((infos[a] for a in self.agents if a in infos), None)
        source = self.mask_source = masks.settle_source(self.mask_source, first)
        if source is None:
            return
        M = self.rows_per_env
        for j, agent in enumerate(self.agents):
            r = i * M + j
            self._mask_rows[r] = self._agent_mask(i, agent, source, obs, infos, at_reset) if self._alive[r] else True

    def _agent_mask(self, i: int, agent: str, source: str, obs: dict, infos: dict, at_reset: bool) -> np.ndarray:
        """The ``[A]`` bool mask of agent ``agent`` of copy i, read and checked (shell.envs.masks)."""
        steps = self.parent.steps
        try:
            raw = masks.read_mask(source, obs[agent] if source == "obs" else None, infos.get(agent) or {},
                                  whose_info=f"the info of agent {agent!r}")
            mask = masks.check_mask(np.asarray(raw)[None], 1, self.action_space,
                                    row=lambda _: f"agent {agent!r} of copy {i}", where=masks.moment(at_reset, steps))
        except masks.MaskError as exc:
            raise masks.env_error(exc, self.parent.name, at_reset, steps) from None
        return mask[0]

    def observation(self, rows_obs: list[Any] | None = None) -> Any:
        """The rows' observations as the policy sees them (see the module doc), as tensors."""
        rows_obs = self._obs if rows_obs is None else rows_obs
        M, N = self.rows_per_env, self.copies
        own_space = self._own_space
        if isinstance(own_space, spaces.Dict):
            own: Any = {k: np.stack([self._own_part(o, k) for o in rows_obs]) for k in own_space.spaces}
        else:
            own = np.stack([self._own_part(o, None) for o in rows_obs])
        ids = np.tile(np.eye(M, dtype=np.float32), (N, 1))
        critic = None
        if self.critic != "local":
            shared = np.stack(self.parent.states) if self.critic == "state" else own.reshape(N, -1)
            critic = np.concatenate([np.repeat(shared.astype(np.float32, copy=False), M, axis=0), ids], axis=1)
        return to_tensor(agent_view(own, ids if self.agent_id else None, critic), self.layout, self.device)

    def _own_part(self, obs: Any, key: str | None) -> np.ndarray:
        """One row's own observation (or its Dict part ``key``), zeros for a row whose agent is gone."""
        space = self._own_space if key is None else self._own_space.spaces[key]
        if obs is None:
            return np.zeros(space.shape, dtype=space.dtype)
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

    def end_step(self) -> StepResult:
        final_obs = self.observation(self._final_rows) if self._truncated.any() else None
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


class ParallelVecEnv:
    """N copies of a PettingZoo ``ParallelEnv``; its agents in groups (:attr:`groups`, :class:`GroupRows`).

    A :class:`shell.envs.base.LaneEnv` with a lane per group: :meth:`reset` returns ``{group: Rows}`` and
    :meth:`step` takes ``{group: action}``: all groups act in the same joint step. Copy i is seeded
    ``seed + i`` at a reset; a copy whose last agent is done resets in the same step (SAME_STEP).

    Args:
        envs: the N parallel envs (closed with this object).
        cfg: the env config (``groups``, ``action_mask``, ``max_episode_steps``).
        device: where the tensors go.
        policy: the policy config (``agent_id``, ``critic``); None = the defaults.
        name: the env's name for messages.

    Raises:
        ConfigError: an AEC env, groups that do not cover every agent or mix spaces, an unsupported space,
            ``critic = "state"`` on an env without ``state()``, or a mask convention that finds no mask.
    """

    def __init__(self, probe: Any, make_copies: Callable[[bool], Any], copies: int, cfg: EnvConfig,
                 device: torch.device, policy: PolicyConfig | None = None, name: str | None = None):
        name = name or type(probe).__name__  # make passes env.id, from_factory the factory's name
        self.probe, self.name, self.device = probe, name, device
        self.copies = copies
        self.steps = 0
        self.copy_envs: Any = None  # SyncCopies or AsyncCopies, made once the config is checked
        policy = policy or PolicyConfig()
        first = probe
        self.states: list[np.ndarray | None] = [None] * copies
        self.state_size = 0
        try:
            _check_parallel(first, name)
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
                            list(rows.agents)) for g, rows in self.groups.items()}

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
        for i, (obs, infos, agents, state) in outs.items():
            self._length[i] = 0
            self.states[i] = state
            for rows in self.groups.values():
                rows.copy_reset(i, obs, infos, set(agents), at_reset)

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
        for i, (obs, rewards, terms, truncs, infos, agents, state) in enumerate(results):
            self._length[i] += 1
            if self._cap is not None and self._length[i] >= self._cap and agents:
                # env.max_episode_steps: truncate every agent still there
                truncs = {**truncs, **dict.fromkeys(agents, True)}
                present: set[str] = set()
            else:
                present = set(agents)
            for rows in self.groups.values():
                rows.copy_step(i, obs, rewards, terms, truncs, present)
            if not present:  # the copy's episode is over: SAME_STEP reset
                for rows in self.groups.values():
                    rows.copy_ended(i, int(self._length[i]))
                ended[i] = None
            else:
                self.states[i] = state
                for rows in self.groups.values():
                    rows.read_masks(i, obs, infos, at_reset=False)
        if ended:
            self._reset(ended)
        return {g: rows.end_step() for g, rows in self.groups.items()}

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


# ----------------------------------------------------------------------------- the backend's functions
def check_config(cfg: EnvConfig) -> None:
    """PettingZoo envs are not gymnasium envs: no wrappers, no Atari chain, no key filter.
    (``env.vectorization_mode = "async"`` steps the copies in worker processes, :class:`AsyncCopies`.)

    Raises:
        ConfigError: ``env.wrappers``, ``env.atari`` or ``env.obs_keys``.
    """
    if cfg.wrappers:
        raise ConfigError("env.wrappers need env.backend = 'gymnasium', not 'pettingzoo'")
    if cfg.atari or cfg.terminal_on_life_loss:
        raise ConfigError("env.atari and env.terminal_on_life_loss need a gymnasium backend, not 'pettingzoo'")
    if cfg.obs_keys is not None:
        raise ConfigError("env.obs_keys is for gymnasium Dict observations; env.backend = 'pettingzoo' takes none")


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Runs on PettingZoo are evaluated on the same env."""
    return cfg


def _build(factory: Callable[..., Any], cfg: EnvConfig, num_envs: int, device: torch.device,
           render_mode: str | None, policy: PolicyConfig | None, name: str) -> ParallelVecEnv:
    """The copies of ``factory()`` behind a :class:`ParallelVecEnv`: in this process (``sync``), or in worker
    processes (``async``), where one more copy in this process answers for the spaces.

    Raises:
        ConfigError: the factory raised or made something that is not a Parallel-API env (one line).
    """
    copies = max(1, num_envs)
    os.environ.setdefault("SDL_VIDEODRIVER", "dummy")  # MPE's pygame renders headless
    in_workers = cfg.vectorization_mode == "async" and copies > 1
    envs: list[Any] = []
    try:
        for _ in range(1 if in_workers else copies):
            envs.append(factory(render_mode=render_mode) if render_mode else factory())
            if len(envs) == 1:
                _check_parallel(envs[0], name)
    except ConfigError:
        SyncCopies(envs, False).close()
        raise
    except Exception as exc:
        SyncCopies(envs, False).close()
        context = f" (env.kwargs = {dict(cfg.kwargs)!r})" if cfg.kwargs else ""
        raise ConfigError(f"cannot make env {name!r}: {type(exc).__name__}: {first_line(exc)}{context}") from None
    if in_workers:
        def make_copies(with_state: bool) -> AsyncCopies:
            return AsyncCopies(factory, copies, render_mode, with_state, name)

        return ParallelVecEnv(envs[0], make_copies, copies, cfg, device, policy, name)
    return ParallelVecEnv(envs[0], lambda with_state: SyncCopies(envs, with_state), copies, cfg, device, policy,
                          name)


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> ParallelVecEnv:
    """``num_envs`` copies of ``parallel_env(**env.kwargs)`` from the module ``env.id``.

    Raises:
        ConfigError: see :class:`ParallelVecEnv` and :func:`_factory_from_id`; ``wrappers`` (none apply).
    """
    if wrappers:
        raise ConfigError("wrappers need env.backend = 'gymnasium'; a PettingZoo env takes none")
    return _build(_factory_from_id(cfg), cfg, num_envs, device, render_mode, policy, cfg.id)


def from_factory(factory: Callable[[], Any], cfg: EnvConfig, num_envs: int, device: torch.device,
                 render_mode: str | None = None, wrappers: list | None = None,
                 policy: PolicyConfig | None = None) -> ParallelVecEnv:
    """``num_envs`` copies of a user's ``factory()`` returning a ``pettingzoo.ParallelEnv``."""
    if wrappers:
        raise ConfigError("wrappers need env.backend = 'gymnasium'; a PettingZoo env takes none")
    return _build(factory, cfg, num_envs, device, render_mode, policy, source_name(factory))
