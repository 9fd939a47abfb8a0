"""Checkpoint -> agent, and the public :class:`Policy` that deploys one.

The one path from a checkpoint file to an agent, which the ``eval`` and ``export`` commands,
:func:`load_policy` and ``--resume`` (``shell.resume``, then ``Trainer.load_state_dict``) all take:

1. :func:`read_checkpoint`: a run dir's newest checkpoint or a named file, loaded with
   ``weights_only=True`` (:func:`shell.checkpoint.load_checkpoint`);
2. an untrained agent for the run's spaces: :func:`agent_for_spaces` from the spaces the checkpoint
   stores (key ``"spaces"``, written by the Trainer), so a policy loads without its env or the env's
   package; a checkpoint written before the spaces were stored falls back to :func:`build_agent`,
   which makes a one-env vector env of the config's id (or of ``env``, for a run trained from a
   factory or a ready vector env) to read them. The Trainer builds its agent with
   :func:`agent_for_spaces` too, from its envs' spaces;
3. :func:`load_weights`: the checkpoint's parameters and normaliser statistics into that agent,
   after checking that the agent's spaces are the ones the checkpoint was trained on.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces

from shell.actions import action_row, to_env_action
from shell.checkpoint import latest_checkpoint, load_checkpoint, space_from_data
from shell.config import Config, config_from_saved
from shell.devices import resolve_device
from shell.envs import make_lanes
from shell.envs.masks import MASK_KEY, MaskError, check_mask, require_mask
from shell.errors import ConfigError, clipped, space_text
from shell.observations import ACTOR_KEY, AGENT_ID_KEY, CRITIC_KEY, agent_view, obs_layout, to_tensor
from shell.policies import ActorCritic, lane_spaces, lanes_policy

__all__ = ["SOURCE_NAMES", "Policy", "agent_for_spaces", "build_agent", "checkpoint_spaces", "load_agent",
           "load_policy", "load_weights", "read_checkpoint", "require_env", "resolve_checkpoint"]

SOURCE_NAMES = {"factory": "an env factory", "vector_env": "a ready vector env"}  # checkpoint["env_source"]


def resolve_checkpoint(target: str | Path) -> Path:
    """A checkpoint file as given, or the newest in ``RUN_DIR/checkpoints``.

    Raises:
        ConfigError: no such file or folder, or no checkpoint in the folder.
    """
    path = Path(target)
    if path.is_dir():
        return latest_checkpoint(path / "checkpoints" if (path / "checkpoints").is_dir() else path)
    if not path.exists():
        raise ConfigError(f"{target}: no such run dir or checkpoint")
    return path


def read_checkpoint(target: str | Path, map_location: str | torch.device = "cpu") -> tuple[Path, dict[str, Any]]:
    """``(path, state)`` of a run dir's newest checkpoint or of a checkpoint file.

    Raises:
        ConfigError: a bad target; a missing, truncated or corrupt checkpoint.
    """
    path = resolve_checkpoint(target)
    return path, load_checkpoint(path, map_location=map_location)


def require_env(name: str | Path, state: dict[str, Any], env: Any, remedy: str) -> None:
    """Refuse a run trained on a factory or a ready vector env when its env is needed and not given.

    Args:
        name: the run dir or checkpoint, for the message.
        state: the checkpoint.
        env: what the caller has in place of the config's id (None: nothing).
        remedy: what to do instead, from Python; ``{env}`` in it becomes ``<the same env factory>``
            (or ``<the same vector env>``).

    Raises:
        ConfigError: one line, ``"<name> was trained on an env factory, which its config cannot
            rebuild; <remedy>"``.
    """
    kind = state.get("env_source")
    if kind is not None and env is None:
        what = SOURCE_NAMES[kind]
        raise ConfigError(f"{name} was trained on {what}, which its config cannot rebuild; "
                          + remedy.replace("{env}", f"<the same {what.split(' ', 1)[1]}>"))


def checkpoint_spaces(state: dict[str, Any]) -> tuple[gym.Space, gym.Space] | None:
    """The ``(observation_space, action_space)`` a checkpoint stores (None for one written before
    checkpoints stored them)."""
    data = state.get("spaces")
    if data is None:
        return None
    return space_from_data(data["observation"]), space_from_data(data["action"])


def agent_for_spaces(observation_space: gym.Space, action_space: gym.Space, config: Config) -> ActorCritic:
    """An untrained agent (on the CPU) for these single-env spaces and the config's ``[policy]``.

    Its initial parameters come from torch's global RNG (the Trainer seeds it under ``fork_rng``).

    Raises:
        ConfigError: a space the policies cannot serve.
    """
    return ActorCritic(observation_space, action_space, config.policy, config.env.normalize_obs, config.env.obs_clip,
                       value_norm=config.ppo.value_norm)


def build_agent(config: Config, device: torch.device, source: Any = None) -> tuple[ActorCritic, gym.Space]:
    """An untrained agent for the config's env (or ``source``'s), and the env's observation space.

    A one-env vector env is made to read the spaces: the fallback for checkpoints that do not store
    them (:func:`checkpoint_spaces`).
    """
    env = make_lanes(config.env, device, num_envs=1, source=source, policy=config.policy)
    try:
        spec = next(iter(env.lanes.values()))  # checkpoints without spaces predate several lanes
        return agent_for_spaces(spec.observation_space, spec.action_space, config).to(device), spec.observation_space
    finally:
        env.close()


def load_weights(agent: ActorCritic, state: dict[str, Any], average: bool | None = None) -> None:
    """Load a checkpoint's parameters and buffers into ``agent``: the policy's (``state["model"]``) or the average
    policy's (``state["average"]``: ``ppo.average_decay``). ``average`` None (the default) takes the run's deployed
    policy, the average where the checkpoint holds one; True requires the average, False takes the policy.

    Raises:
        ConfigError: the agent's observation or action space differs from the one the checkpoint
            stores (an env other than the one the run was trained on); ``average`` for a checkpoint without an
            average policy.
    """
    if average is None:
        average = "average" in state
    if average and "average" not in state:
        raise ConfigError("the checkpoint holds no average policy: its run was trained without ppo.average_decay")
    stored = checkpoint_spaces(state)
    if stored is not None:
        for what, saved, have in zip(("observation", "action"), stored,
                                     (agent.observation_space, agent.action_space), strict=True):
            if saved != have:
                raise ConfigError(f"the env's {what} space {space_text(have, 48)} differs from the checkpoint's "
                                  f"{space_text(saved, 48)}; use the run's own env")
    agent.load_state_dict(state["average" if average else "model"])


def load_agent(target: str | Path, device: str | torch.device = "cpu",
               env: Any = None, average: bool | None = None) -> tuple[ActorCritic, Config, dict[str, Any]]:
    """Load ``(agent, config, checkpoint state)`` from a run dir or checkpoint file, onto ``device``,
    in eval mode. The agent is the run's deployed policy: its average policy where it kept one
    (``ppo.average_decay``), else the policy; ``average=False`` takes the last policy, ``average=True`` requires
    the average.

    The agent is built from the spaces the checkpoint stores, without the env. ``env`` (a factory or
    a vector env) is needed only for a checkpoint that does not store them and whose run was
    trained on one; such a checkpoint of a run trained on an id builds a one-env vector env of it.

    Raises:
        ConfigError: a bad target; a missing, truncated or corrupt checkpoint; an old checkpoint of a
            factory run without ``env``; ``average=True`` for a run without an average policy.
    """
    device = resolve_device(device) if isinstance(device, str) else device
    path, state = read_checkpoint(target, device)
    config = config_from_saved(state["config"])
    stored = checkpoint_spaces(state)
    if stored is None:
        require_env(path, state, env, f"use it from Python with env={{env}}: shell.load_policy({str(target)!r}, "
                                       "env=...), export_policy(..., env=...)")
        agent, _ = build_agent(config, device, env)
    else:  # one policy per lane (group of agents), laid out as the Trainer's (shell/lanes.py)
        lanes = lane_spaces(*stored, (state.get("spaces") or {}).get("agents"))
        agent = lanes_policy({name: agent_for_spaces(*pair, config) for name, pair in lanes.items()}).to(device)
    load_weights(agent, state, average)
    agent.action_mask_source = state.get("action_mask")
    agent.eval()
    return agent, config, state


class Policy:
    """A trained policy as a plain callable: observation(s) -> action(s), deterministic.

    Accepts one observation (shaped as the env's observation space, after the config's
    ``env.obs_keys`` filter and Atari chain; a dict for Dict spaces, extra keys ignored) or a
    batch ``[N, ...]``; returns numpy actions as the env takes them: the action
    space's shape and dtype, inside its bounds (shell.actions.to_env_action), with
    the same batch-ness as the input. A Dict or Tuple action space gives a dict or tuple of such
    arrays, nested as the space is (each part batched for a batch).

    A recurrent policy keeps its state per env between calls (row i of a batch is env i; one
    observation is env 0). Call :meth:`reset` before a new episode, for all envs or for some
    (``policy.reset([2])``), or pass ``episode_start`` (``[N]`` bool) to restart those rows.
    A call with a different batch size starts every env afresh.

    A policy trained with action masks (``agent.action_mask_source`` is not None) acts only with its
    mask: ``policy(obs, action_mask=mask)`` (``[A]`` for one observation, ``[N, A]`` for a batch; bool,
    or integers 0/1; MultiDiscrete: the component masks concatenated), or a Dict observation holding
    the key ``"action_mask"``. Called without one it raises ValueError, since acting unmasked would
    be silently wrong. A masked action is never returned.

    Args:
        agent: the ActorCritic.
        observation_space: the env's observation space.
        action_space: the env's action space; defaults to ``agent.action_space``.
    """

    def __init__(self, agent: torch.nn.Module, observation_space: gym.Space, action_space: gym.Space | None = None):
        self.agent = agent
        self.observation_space = observation_space
        self.action_space = action_space if action_space is not None else agent.action_space
        self.device = next(agent.parameters()).device
        self.layout = obs_layout(observation_space)
        self.state: torch.Tensor | None = None  # recurrent policies: [N, S] after the last call
        self._start: torch.Tensor | None = None  # rows whose next observation starts an episode

    @property
    def recurrent(self) -> bool:
        return self.agent.recurrent

    def reset(self, env_indices: Any = None) -> None:
        """Start a new episode in every env (``None``) or in the given envs (recurrent policies;
        a no-op for feed-forward ones)."""
        if self._start is None or env_indices is None:
            self.state = self._start = None
        else:
            index = torch.as_tensor(env_indices, dtype=torch.long, device=self.device).reshape(-1)
            n = len(self._start)
            if len(index) and not (-n <= int(index.min()) and int(index.max()) < n):
                raise IndexError(f"Policy.reset({env_indices!r}): the policy holds the state of {n} env(s)")
            start = self._start.clone()  # a plain tensor: the stored one was made in inference mode
            start[index] = True
            self._start = start

    @property
    def masked(self) -> bool:
        """Whether the policy was trained with action masks (and so needs one to act)."""
        return self.agent.action_mask_source is not None

    def __call__(self, obs: Any, episode_start: Any = None, action_mask: Any = None) -> np.ndarray:
        """The deterministic action(s): :meth:`act` with ``deterministic=True``."""
        return self.act(obs, True, episode_start, action_mask=action_mask)

    def _mask(self, obs: Any, action_mask: Any, single: bool, n: int) -> torch.Tensor | None:
        """The ``[n, A]`` bool mask on the device from ``action_mask``, or from ``obs["action_mask"]`` for a policy
        trained with the masks of that key (action_mask setting ``"obs"``); None when neither is given to an unmasked
        policy. A policy trained without masks reads an ``"action_mask"`` key of its observation as the
        observation it was in training, never as a mask.

        Raises:
            ValueError: a masked policy without a mask; a mask of the wrong shape, dtype or values, or one
                that leaves a component with no legal action.
        """
        source = self.agent.action_mask_source
        if action_mask is None and source == "obs" and isinstance(obs, dict) and MASK_KEY in obs:
            action_mask = obs[MASK_KEY]
        if action_mask is None:
            require_mask(self.agent, None, "this call",
                         f": pass action_mask=... or a Dict observation with key {MASK_KEY!r}")
            return None
        raw = np.asarray(action_mask)
        try:
            mask = check_mask(raw[None] if single else raw, n, self.action_space)
        except MaskError as exc:
            raise ValueError(f"action_mask: {exc}") from None
        return torch.as_tensor(mask, device=self.device)

    def _batch(self, obs: Any) -> tuple[bool, Any, int]:
        """One observation or a batch -> (whether it was one, the batch ``[N, ...]`` (a dict of them for a Dict
        space), ``N``).

        Raises:
            ValueError: one line naming the shape expected and the shape given (a Dict: the key; a key that is
                missing; keys that mix one observation and a batch, or batches of different sizes).
        """
        if not self.layout.is_dict:
            obs = np.asarray(obs)
            shape = tuple(self.observation_space.shape)
            single = obs.shape == shape
            if not single and obs.shape[1:] != shape:
                raise ValueError(f"the observation has shape {list(obs.shape)}; this policy takes "
                                 f"{_one_or_batch(shape)}")
            return single, obs[None] if single else obs, 1 if single else len(obs)
        if not isinstance(obs, Mapping):
            raise ValueError(f"this policy takes a dict of the observation keys {list(self.layout.parts)}, "
                             f"not a {type(obs).__name__}")
        missing = [key for key in self.layout.parts if key not in obs]
        if missing:
            raise ValueError(f"the observation has no key {missing[0]!r}; this policy takes the keys "
                             f"{list(self.layout.parts)}")
        parts = {key: np.asarray(obs[key]) for key in self.layout.parts}
        shapes = {key: tuple(part.space.shape) for key, part in self.layout.parts.items()}
        for key, shape in shapes.items():
            if parts[key].shape != shape and parts[key].shape[1:] != shape:
                raise ValueError(f"observation key {key!r} has shape {list(parts[key].shape)}; this policy takes "
                                 f"{_one_or_batch(shape)}")
        single = [parts[key].shape == shape for key, shape in shapes.items()]
        if all(single):
            return True, {key: value[None] for key, value in parts.items()}, 1
        sizes = {key: len(value) for key, value in parts.items()}
        if any(single) or len(set(sizes.values())) > 1:
            raise ValueError(f"the observation's keys are not one observation nor one batch: their shapes are "
                             f"{ {key: list(value.shape) for key, value in parts.items()} }")
        return False, parts, len(next(iter(parts.values())))

    def act(self, obs: Any, deterministic: bool = True, episode_start: Any = None,
            generator: torch.Generator | None = None, action_mask: Any = None) -> np.ndarray:
        """Action(s) for one observation or a batch ``[N, ...]``, as numpy in the action space's
        shape and dtype; ``deterministic=False`` samples (from ``generator`` if given); ``action_mask``
        as in the class docstring.

        Raises:
            ValueError: an observation of the wrong shape (one line naming the shape expected and the one given,
                checked before the mask: :meth:`_batch`); a mask as in :meth:`_mask`.
        """
        return self._act_rows(obs, deterministic, episode_start, generator, action_mask)

    def _act_rows(self, obs: Any, deterministic: bool, episode_start: Any, generator: torch.Generator | None,
                  action_mask: Any, rows: list[int] | None = None, size: int | None = None) -> np.ndarray:
        """:meth:`act`; with ``rows``, a batch that is those rows (in that order) of the ``size`` rows whose
        recurrent state this policy keeps: only their states step and lose their episode start, the other
        rows' are untouched (:class:`AgentsPolicy`, for the agents missing from a call). ``rows`` does not
        apply to a feed-forward policy, nor with ``episode_start``."""
        def step(tensor: Any, state: torch.Tensor | None, start: torch.Tensor | None,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.agent.act_step(tensor, state, start, deterministic, generator, action_mask=mask)

        single, return_action = self._step_rows(obs, episode_start, action_mask, step, rows, size)
        with torch.inference_mode():
            action = to_env_action(return_action, self.action_space)
        return action_row(action, 0) if single else action

    def probs(self, obs: Any, episode_start: Any = None, action_mask: Any = None) -> np.ndarray:
        """The action probabilities behind :meth:`__call__` (its action is their legal argmax; :meth:`act` with
        ``deterministic=False`` samples from them), for one observation or a batch ``[B, ...]``, with the same
        arguments and mask rules (a masked policy needs its mask).

        Returns:
            float32 ``[n]`` for one observation, ``[B, n]`` for a batch (the ``n`` actions of a Discrete(n)
            space, index 0 its ``start``); each row sums to 1 and is exactly 0 on the moves its mask forbids
            (core.masked_probs). A recurrent policy's state steps as in :meth:`__call__`.

        Raises:
            ValueError: an action space other than Discrete (one line naming it); an observation or a mask as in
                :meth:`act`.
        """
        return self._probs_rows(obs, episode_start, action_mask)

    def _probs_rows(self, obs: Any, episode_start: Any, action_mask: Any, rows: list[int] | None = None,
                    size: int | None = None) -> np.ndarray:
        """:meth:`probs`, with ``rows`` and ``size`` as in :meth:`_act_rows`."""
        if not isinstance(self.action_space, spaces.Discrete):
            raise ValueError(f"probs needs a Discrete action space; this policy's is {space_text(self.action_space)}")

        def step(tensor: Any, state: torch.Tensor | None, start: torch.Tensor | None,
                 mask: torch.Tensor | None) -> tuple[torch.Tensor, torch.Tensor | None]:
            return self.agent.probs_step(tensor, state, start, action_mask=mask)

        single, probs = self._step_rows(obs, episode_start, action_mask, step, rows, size)
        out = probs.float().cpu().numpy()
        return out[0] if single else out

    def _step_rows(self, obs: Any, episode_start: Any, action_mask: Any, step: Any, rows: list[int] | None,
                   size: int | None) -> tuple[bool, torch.Tensor]:
        """One step of the policy on one observation or a batch: ``(whether it was one, step's output [N, ...])``.

        ``step(obs tensor, state, episode_start, mask) -> (output, state after)`` is the agent's step (an action or
        the probabilities); the recurrent state is kept here, per row (``rows`` of ``size``: :meth:`_act_rows`).
        """
        raw_obs = obs
        single, batch, n = self._batch(obs)
        tensor = to_tensor(batch, self.layout, self.device)
        mask = self._mask(raw_obs, action_mask, single, n)  # after the observation's check: a wrong one is named
        with torch.inference_mode():
            if not self.recurrent:
                out, _ = step(tensor, None, None, mask)
            elif rows is None:
                if self.state is None or self.state.shape[0] != n:
                    self.state = self.agent.initial_state(n, self.device)
                    self._start = torch.ones(n, dtype=torch.bool, device=self.device)
                if episode_start is not None:
                    self._start |= torch.as_tensor(np.asarray(episode_start, dtype=bool).reshape(n),
                                                   device=self.device)
                out, self.state = step(tensor, self.state, self._start, mask)
                self._start = torch.zeros_like(self._start)
            else:
                if self.state is None or self.state.shape[0] != size:
                    self.state = self.agent.initial_state(size, self.device)
                    self._start = torch.ones(size, dtype=torch.bool, device=self.device)
                index = torch.as_tensor(rows, dtype=torch.long, device=self.device)
                out, state = step(tensor, self.state[index], self._start[index], mask)
                self.state = self.state.index_copy(0, index, state)
                self._start = self._start.index_fill(0, index, False)
        return single, out


def _one_or_batch(shape: tuple[int, ...]) -> str:
    """``"[4] (one observation) or [N, 4] (a batch)"``: the observation shapes a policy takes, for a message."""
    return f"{list(shape)} (one observation) or [{', '.join(['N', *map(str, shape)])}] (a batch)"


def load_policy(target: str | Path, device: str | torch.device = "cpu", env: Any = None,
                average: bool | None = None) -> Policy | AgentsPolicy:
    """Load a run dir's newest checkpoint (or a named checkpoint) as a :class:`Policy` on ``device``; a
    multi-agent run's (``env.backend = "pettingzoo"``) as an :class:`AgentsPolicy` (agent dict -> action dict).
    A run that kept an average policy (``ppo.average_decay``) is deployed as it: that is the policy returned;
    ``average=False`` returns the last policy instead, ``average=True`` requires the average (ConfigError for a
    run without one).

    The env is not needed: the checkpoint stores its spaces. ``env`` (a factory or vector env of
    the same kind) serves only checkpoints written before they were stored, of runs trained on one.

    Examples:
        >>> policy = load_policy("runs/Pendulum-v1__s0__20260101-120000")
        >>> action = policy(env.reset()[0])
    """
    agent, config, state = load_agent(target, device, env, average)
    return policy_for(agent, (state.get("spaces") or {}).get("agents"), config.policy.agent_id)


def policy_for(agent: torch.nn.Module, agents: dict[str, list[str]] | None, agent_id: bool = False) -> Any:
    """The deployable policy of a trained agent: a :class:`Policy`, or for a multi-agent run (``agents``:
    each group's agents, as checkpoints store them) an :class:`AgentsPolicy`."""
    if not agents:  # the actor's observation: without policy.critic_keys
        return Policy(agent, agent.actor_observation_space, agent.action_space)
    lanes = list(agent.lanes().values())  # in the groups' order: one lane, or one per group
    members = {g: Policy(lane, lane.actor_observation_space) for g, lane in zip(agents, lanes, strict=True)}
    return AgentsPolicy(members, agents, agent_id)


class AgentsPolicy:
    """A multi-agent run's policy (``env.backend = "pettingzoo"``): ``{agent: observation}`` ->
    ``{agent: action}``, deterministic, for the agents that the dict holds, each by its group's policy.

    Each agent's observation is what the env gives it (not a Dict of ``"obs"`` and ``"critic"``): it is laid
    out as in training (shell/envs/pettingzoo/rows.py), with its one-hot index in its group appended when the run
    used ``policy.agent_id``; a centralised critic's input is not needed to act (the actor never sees it)
    and is filled with zeros. Masks come from each agent's Dict observation key ``"action_mask"``, or
    ``action_mask={agent: mask}``. Pass only the agents that act (``{a: obs[a] for a in env.agents}``).

    A recurrent policy keeps each agent's state between calls, in its group's row of that agent; a call steps
    the rows of the agents it holds only, so an agent missing from a call keeps its state untouched (and an
    agent absent since :meth:`reset` starts afresh when it first acts); call :meth:`reset` at the start of
    every episode.

    Attributes:
        policies: each group's :class:`Policy` over its rows as the trainer saw them.
        groups: each group's agents, in row order.
    """

    def __init__(self, policies: dict[str, Policy], groups: dict[str, list[str]], agent_id: bool):
        self.policies, self.groups, self.agent_id = policies, {g: list(a) for g, a in groups.items()}, agent_id
        self._group_of = {a: g for g, members in self.groups.items() for a in members}

    @property
    def agent(self) -> torch.nn.Module:
        """The policy network (of the only group; a dict by group where there are several)."""
        agents = {g: p.agent for g, p in self.policies.items()}
        return next(iter(agents.values())) if len(agents) == 1 else agents

    @property
    def masked(self) -> bool:
        return any(p.masked for p in self.policies.values())

    def _view(self, group: str, names: list[str], rows: list[Any]) -> Any:
        """The agents ``names`` of ``group`` with their own observations ``rows``, laid out as in training
        (:func:`shell.observations.agent_view`; a centralised critic's input as zeros)."""
        members = self.groups[group]
        own = {k: np.stack([np.asarray(r[k]) for r in rows]) for k in rows[0]} if isinstance(rows[0], dict) \
            else np.stack([np.asarray(r) for r in rows])
        ids = np.eye(len(members), dtype=np.float32)[[members.index(a) for a in names]] if self.agent_id else None
        space = self.policies[group].observation_space
        critic = None
        if isinstance(space, spaces.Dict) and set(space.spaces) == {ACTOR_KEY, CRITIC_KEY}:
            critic = np.zeros((len(names), *space.spaces[CRITIC_KEY].shape), dtype=np.float32)
        return agent_view(own, ids, critic)

    @property
    def recurrent(self) -> bool:
        return any(p.recurrent for p in self.policies.values())

    @staticmethod
    def _group_mask(group: str, names: list[str], action_mask: dict[str, Any] | None) -> np.ndarray | None:
        """``[n, A]`` the masks of a group's agents ``names``, or None where ``action_mask`` has none of them (a
        group of Box actions takes none; a masked group's policy then refuses the missing mask itself).

        Raises:
            ValueError: ``action_mask`` holds the masks of some of the group's agents and not of others.
        """
        if action_mask is None:
            return None
        given = [a for a in names if a in action_mask]
        if not given:
            return None
        if len(given) < len(names):
            missing = clipped([a for a in names if a not in action_mask], 60)
            raise ValueError(f"action_mask gives masks for some agents of group {clipped(group, 20)!r} and not for "
                             f"{missing}: give every acting agent of a group its mask, or none")
        return np.stack([np.asarray(action_mask[a]) for a in names])

    def reset(self) -> None:
        """Start a new episode: every agent's recurrent state restarts (a no-op for feed-forward policies)."""
        for policy in self.policies.values():
            policy.reset()

    def act(self, obs: dict[str, Any], deterministic: bool = True,
            action_mask: dict[str, Any] | None = None) -> dict[str, Any]:
        """:meth:`__call__`, or with ``deterministic=False`` sampled actions."""
        return self._act(obs, deterministic, action_mask)

    def __call__(self, obs: dict[str, Any], action_mask: dict[str, Any] | None = None) -> dict[str, Any]:
        """The deterministic actions of the agents in ``obs``.

        Raises:
            ValueError: ``obs`` is not a dict of agents, an agent this policy does not know; a masked policy
                without masks (see :class:`Policy`); masks for some agents of a group and not for the others.
                A group of Box actions needs no entry in ``action_mask``.
        """
        return self._act(obs, True, action_mask)

    def _check_agents(self, obs: Any) -> None:
        """Raise ValueError (one line) where ``obs`` is not a dict of this policy's agents."""
        if not isinstance(obs, dict):
            raise ValueError(f"a multi-agent policy takes a dict {{agent: observation}} of the agents "
                             f"{sorted(self._group_of)}, not a {type(obs).__name__}")
        unknown = [a for a in obs if a not in self._group_of]
        if unknown:
            raise ValueError(f"agents {unknown} are not in this policy's groups {self.groups}")

    def probs(self, obs: dict[str, Any], action_mask: dict[str, Any] | None = None) -> dict[str, np.ndarray]:
        """The action probabilities behind :meth:`__call__` for the agents in ``obs``, each by its group's policy
        (:meth:`Policy.probs`), with the same observations and mask rules.

        A feed-forward policy takes one observation or a batch ``[B, ...]`` per agent (each laid out as in
        training: the agent's one-hot index appended where the run used ``policy.agent_id``), with its mask
        ``[A]`` or ``[B, A]`` in ``action_mask[agent]``. A recurrent one takes one observation per agent and steps
        that agent's state as :meth:`__call__` does.

        Returns:
            ``{agent: float32 [A] or [B, A]}``, as each agent's observation was one or a batch: rows summing to 1,
            exactly 0 on the moves the mask forbids.

        Raises:
            ValueError: as :meth:`__call__`; a group whose action space is not Discrete (naming it); an
                observation that is neither one nor a batch of the agent's own shape; a batch for a recurrent
                policy.
        """
        self._check_agents(obs)
        out: dict[str, np.ndarray] = {}
        for group, members in self.groups.items():
            names = [a for a in members if a in obs]
            if not names:
                continue
            policy = self.policies[group]
            own = self._own_space(group)
            parts = {a: self._one_or_batch(a, obs[a], own) for a in names}
            if policy.recurrent:
                batched = [a for a in names if parts[a] is not None]
                if batched:
                    raise ValueError(f"a recurrent policy's probs take one observation per agent (its state is the "
                                     f"agent's); agent {batched[0]!r} was given a batch")
                batch = self._view(group, names, [obs[a] for a in names])
                mask = self._group_mask(group, names, action_mask)
                rows = [members.index(a) for a in names]
                probs = policy._probs_rows(batch, None, mask, rows, len(members))
                out.update(zip(names, probs, strict=True))
                continue
            row_names: list[str] = []
            row_obs: list[Any] = []
            for a in names:  # each agent's rows: its one observation, or its batch's
                rows_of_a = [obs[a]] if parts[a] is None else parts[a]
                row_names += [a] * len(rows_of_a)
                row_obs += rows_of_a
            mask = self._rows_mask(group, names, parts, action_mask)
            if row_obs:
                probs = policy.probs(self._view(group, row_names, row_obs), action_mask=mask)
            elif isinstance(policy.action_space, spaces.Discrete):  # only empty batches: no rows to score
                probs = np.zeros((0, int(policy.action_space.n)), np.float32)
            else:
                raise ValueError(f"probs needs a Discrete action space; group {clipped(group, 20)!r} has "
                                 f"{space_text(policy.action_space)}")
            start = 0
            for a in names:
                count = 1 if parts[a] is None else len(parts[a])
                out[a] = probs[start] if parts[a] is None else probs[start:start + count]
                start += count
        return out

    def _own_space(self, group: str) -> gym.Space:
        """One agent's own observation space in ``group``: what the env gives it, before the one-hot index
        (``policy.agent_id``) and without a centralised critic's input."""
        space = self.policies[group].observation_space
        if isinstance(space, spaces.Dict) and set(space.spaces) == {ACTOR_KEY, CRITIC_KEY}:
            space = space.spaces[ACTOR_KEY]
        if not self.agent_id:
            return space
        if isinstance(space, spaces.Dict):
            return spaces.Dict({k: v for k, v in space.spaces.items() if k != AGENT_ID_KEY})
        M = len(self.groups[group])
        return spaces.Box(space.low[:-M], space.high[:-M], dtype=space.dtype)

    @staticmethod
    def _one_or_batch(agent: str, obs: Any, own: gym.Space) -> list[Any] | None:
        """None where ``obs`` is one observation of ``own``; the list of its rows where it is a batch ``[B, ...]``.

        Raises:
            ValueError: it is neither (one line naming the shapes).
        """
        if isinstance(own, spaces.Dict):
            if not isinstance(obs, Mapping):
                raise ValueError(f"agent {agent!r} observes a dict of the keys {list(own.spaces)}, not a "
                                 f"{type(obs).__name__}")
            parts = {k: np.asarray(obs[k]) for k in own.spaces if k in obs}
            if all(parts[k].shape == own.spaces[k].shape for k in parts):
                return None
            sizes = {len(v) for v in parts.values() if v.ndim}
            if len(sizes) == 1 and all(parts[k].shape[1:] == own.spaces[k].shape for k in parts):
                size = sizes.pop()
                every = {k: np.asarray(v) for k, v in obs.items()}  # the other keys too (an "action_mask")
                every = {k: v for k, v in every.items() if v.ndim and len(v) == size}
                return [{k: v[i] for k, v in every.items()} for i in range(size)]
            raise ValueError(f"agent {agent!r}: the observation's keys are not one observation nor one batch: "
                             f"{ {k: list(v.shape) for k, v in parts.items()} }")
        value = np.asarray(obs)
        shape = tuple(own.shape)
        if value.shape == shape:
            return None
        if value.shape[1:] == shape:
            return list(value)
        raise ValueError(f"agent {agent!r}: the observation has shape {list(value.shape)}; this policy takes "
                         f"{_one_or_batch(shape)}")

    @staticmethod
    def _rows_mask(group: str, names: list[str], parts: dict[str, list[Any] | None],
                   action_mask: dict[str, Any] | None) -> np.ndarray | None:
        """``[rows, A]``: each agent's mask ``[A]`` (one observation) or ``[B, A]`` (a batch), stacked in row
        order; None where ``action_mask`` has none of the group's agents.

        Raises:
            ValueError: masks for some of the group's agents and not for others; a mask whose rows are not its
                agent's.
        """
        if action_mask is None or not any(a in action_mask for a in names):
            return None
        missing = [a for a in names if a not in action_mask]
        if missing:
            raise ValueError(f"action_mask gives masks for some agents of group {clipped(group, 20)!r} and not for "
                             f"{clipped(missing, 60)}: give every agent of a group its mask, or none")
        blocks = []
        for a in names:
            mask = np.asarray(action_mask[a])
            rows = 1 if parts[a] is None else len(parts[a])
            if parts[a] is None and mask.ndim == 1:
                mask = mask[None]
            if mask.ndim != 2 or len(mask) != rows:
                raise ValueError(f"action_mask[{a!r}] has shape {list(mask.shape)}; the agent's observation is "
                                 f"{'one' if parts[a] is None else f'a batch of {rows}'}, so its mask is "
                                 f"{'[A]' if parts[a] is None else f'[{rows}, A]'}")
            blocks.append(mask)
        return np.concatenate(blocks)

    def _act(self, obs: dict[str, Any], deterministic: bool, action_mask: dict[str, Any] | None) -> dict[str, Any]:
        self._check_agents(obs)
        out: dict[str, Any] = {}
        for group, members in self.groups.items():
            names = [a for a in members if a in obs]
            if not names:
                continue
            policy = self.policies[group]
            batch = self._view(group, names, [obs[a] for a in names])
            mask = self._group_mask(group, names, action_mask)
            if policy.recurrent and len(names) < len(members):
                # each agent keeps its group's row of the state: the rows of the agents present step, the
                # others keep their state (and their episode start) untouched
                rows = [members.index(a) for a in names]
                actions = policy._act_rows(batch, deterministic, None, None, mask, rows, len(members))
            else:
                actions = policy.act(batch, deterministic, action_mask=mask)
            out.update((name, action_row(actions, i)) for i, name in enumerate(names))
        return out
