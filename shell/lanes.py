"""A run's learners: one lane per group of agents (DESIGN.md, "The fourth round"). A single-agent env is one lane.

A lane holds its policy (an :class:`shell.policies.ActorCritic`), its normalisers (observations, in the
policy; rewards, a :class:`shell.normalization.RewardScaler`), its ``[T, N]`` storage, its PPO update and
optimiser state, and its part of the rollout (:class:`shell.rollout.LaneRollout`). :class:`Lanes` builds
them from the env's lanes (:class:`shell.envs.base.LaneSpec`), drives one :class:`shell.rollout.Collector`
over all of them in joint steps, walks them in one update loop, and lays them out in checkpoints as
today's files have them: a run of one lane keeps a single-agent run's keys (``model``, ``optimizer``,
``reward_scaler`` of the one policy), a run of several has each keyed by group.

This module and the env layer are the only places that know whether a run has one lane or several.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from gymnasium import spaces
from torch.optim.swa_utils import AveragedModel, get_ema_multi_avg_fn

import core
from shell.checkpoint import space_to_data
from shell.config import Config
from shell.distributed import Dist
from shell.envs import import_object
from shell.envs.base import LaneEnv, Rows
from shell.errors import ConfigError
from shell.inference import agent_for_spaces
from shell.normalization import RewardScaler
from shell.policies import ActorCritic, default_ent_coef, lanes_policy
from shell.ppo import PPO
from shell.rollout import Collector, LaneRollout
from shell.storage import RolloutStorage

LANE_METRICS = ("policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac", "explained_variance", "grad_norm",
                "epochs")
"""A lane's own update metrics, as ``metrics.<group>.csv`` holds them (a run of several lanes)."""


class Lane:
    """One group of agents' learner (see the module doc).

    Attributes:
        name: the group (None for a single-agent env).
        agent: its actor-critic, on the run's device.
        reward_scaler: its reward scaler.
        ent_coef: its entropy coefficient (``ppo.ent_coef``, else the default of its action space).
        ppo: its PPO update (and optimiser).
        storage: its ``[T, N]`` rollout storage.
        rollout: its part of the rollout.

    ``turns`` (the lane's :attr:`shell.envs.base.LaneSpec.turns`): its rows are seats of a turn-based game.
    """

    def __init__(self, name: str | None, agent: ActorCritic, rows: int, config: Config, device: torch.device,
                 generator: torch.Generator, dist: Dist, turns: bool = False):
        self.name, self.agent = name, agent
        if config.ppo.rpo_alpha and not isinstance(agent.action_space, spaces.Box):
            where = "" if name is None else f" of group {name!r}"
            raise ConfigError(f"ppo.rpo_alpha = {config.ppo.rpo_alpha} perturbs a Gaussian's mean: it needs Box "
                              f"actions, and the action space{where} is {agent.action_space}")
        self.reward_scaler = RewardScaler(config.ppo.gamma, config.env.normalize_reward,
                                          config.env.reward_clip).to(device)
        self.ent_coef = config.ppo.ent_coef if config.ppo.ent_coef is not None else default_ent_coef(agent.action_space)
        if config.ppo.magnet_coef and not isinstance(agent.action_space, (spaces.Discrete, spaces.MultiDiscrete)):
            where = "" if name is None else f" of group {name!r}"
            raise ConfigError(f"ppo.magnet_coef = {config.ppo.magnet_coef} compares Categorical policies: it needs "
                              f"Discrete or MultiDiscrete actions, and the action space{where} is "
                              f"{agent.action_space}")
        dist.broadcast_parameters(agent)
        seq_len = (config.policy.seq_len or config.ppo.num_steps) if agent.recurrent else 0
        symmetry = None if config.ppo.symmetry is None else import_object(config.ppo.symmetry, "ppo.symmetry")
        if symmetry is not None and not callable(symmetry):
            raise ConfigError(f"ppo.symmetry = {config.ppo.symmetry!r} is an object of type "
                              f"{type(symmetry).__name__}, not a function of (obs, raw_actions, action_mask)")
        self.ppo = PPO(agent, config.ppo, self.ent_coef, generator, dist, seq_len, config.run.compile, symmetry)
        #: ``ppo.average_decay``: the lane's average policy (``average.module``), an exponential moving average of
        #: its weights after every update (None: none)
        self.average: AveragedModel | None = None
        if config.ppo.average_decay:  # 1: torch's own equal-weight running mean (stochastic weight averaging)
            ema = None if config.ppo.average_decay == 1.0 else get_ema_multi_avg_fn(config.ppo.average_decay)
            self.average = AveragedModel(agent, multi_avg_fn=ema, use_buffers=False)
        # raw actions are stored as the policy samples them (float pre-tanh u for any Box), not in the space's dtype
        state = agent.initial_state(1, device)
        # one storage row per env row: a multi-agent env's copies times the lane's agents
        self.storage = RolloutStorage(config.ppo.num_steps, rows, agent.layout, agent.actor.raw_action_shape,
                                      agent.actor.raw_action_dtype, device,
                                      state_size=0 if state is None else state.shape[1], turns=turns)
        self.rollout = LaneRollout(agent, self.storage, self.reward_scaler, config, generator, dist)


class Lanes:
    """Every lane of a run (see the module doc), built for ``env``'s lanes in their order. The lanes act in whatever
    env :meth:`collect` is given with these lanes (a game's under ``[selfplay]``: :class:`shell.games.PoolEnv`).

    Every lane's initial parameters come from ``config.run.seed`` (torch's global RNG under ``fork_rng``,
    so the caller's is left as it was): the same on every rank.

    Args:
        env: the run's lane env.
        config: the run's config.
        device: where the lanes live.
        generator: the rank's generator (sampling and minibatch order; the lanes draw in lane order).
        dist: the process group.

    Raises:
        ConfigError: a space the policies cannot serve.
    """

    def __init__(self, env: LaneEnv, config: Config, device: torch.device, generator: torch.Generator, dist: Dist):
        specs = env.lanes
        with torch.random.fork_rng(devices=[]):  # the caller's global RNG is left as it was
            torch.manual_seed(config.run.seed)  # the same initial parameters on every rank
            agents = {name: agent_for_spaces(spec.observation_space, spec.action_space, config)
                      for name, spec in specs.items()}
        self.lanes = {name: Lane(name, agents[name].to(device), spec.num_envs, config, device, generator, dist,
                                 spec.turns) for name, spec in specs.items()}
        #: the run's policy as checkpoints store it (one ActorCritic, or an AgentGroups by group)
        self.agent = lanes_policy({name: lane.agent for name, lane in self.lanes.items()})
        self.collector = Collector({name: lane.rollout for name, lane in self.lanes.items()}, config.ppo.num_steps)
        agent_lists = {name: spec.agents for name, spec in specs.items() if spec.agents is not None}
        # the spaces as plain data, in every checkpoint: the policy loads without the env (shell/inference.py)
        self.spaces: dict[str, Any] = {"observation": space_to_data(self.agent.observation_space),
                                       "action": space_to_data(self.agent.action_space)}
        if agent_lists:  # a multi-agent env's rows: load_policy maps agent dicts
            self.spaces["agents"] = agent_lists

    @property
    def only(self) -> Lane:
        """The lane of a run of one (ValueError for a run of several)."""
        if self.several:
            raise ValueError(f"the run has {len(self.lanes)} lanes {list(self.lanes)}; pick one from .lanes")
        return next(iter(self.lanes.values()))

    @property
    def reported(self) -> list[str]:
        """The lanes whose own metrics a run reports beside its mean (``metrics.<group>.csv``): every lane of a
        run of several, none of a run of one (metrics.csv is then that lane's)."""
        return list(self.lanes) if self.several else []

    @property
    def several(self) -> bool:
        """More than one lane: the run writes a metrics file per lane."""
        return len(self.lanes) > 1

    # ------------------------------------------------------------------ the loop's steps
    def restart(self, env: LaneEnv) -> None:
        """``env`` was reset (:meth:`shell.rollout.Collector.restart`)."""
        self.collector.restart(env)

    def collect(self, env: LaneEnv, rows: dict[str | None, Rows],
                poll: Callable[[int], None]) -> tuple[dict[str | None, Rows], dict[str | None, torch.Tensor]]:
        """One rollout of every lane in ``env`` (:meth:`shell.rollout.Collector.collect`)."""
        return self.collector.collect(env, rows, poll)

    def set_learning_rate(self, lr: float) -> None:
        for lane in self.lanes.values():
            lane.ppo.set_learning_rate(lr)

    def set_ent_coef(self, update: int, num_updates: int, end: float) -> None:
        """``ppo.ent_coef_end``: each lane's entropy coefficient at ``update``, linear from its own (at update 0) to
        ``end`` (at ``num_updates``)."""
        for lane in self.lanes.values():
            lane.ppo.ent_coef = core.linear_schedule(lane.ent_coef, end, update, num_updates)

    def after_update(self, update: int, magnet_every: int, average_from: int = 0) -> None:
        """After every update each lane's average policy takes in its weights (``ppo.average_decay``; its buffers,
        such as the observation statistics, are the policy's own): up to update ``average_from``
        (``ppo.average_start``) it is a copy of the policy, after it their exponential moving average. After
        every ``magnet_every``-th update each lane's magnet becomes its policy (``ppo.magnet_every``)."""
        for lane in self.lanes.values():
            if lane.average is not None:
                if update <= average_from:  # not started: the next update_parameters copies the policy
                    lane.average.n_averaged.zero_()
                lane.average.update_parameters(lane.agent)
                lane.average.module.action_mask_source = lane.agent.action_mask_source  # it acts as the policy does
                with torch.no_grad():
                    for mine, theirs in zip(lane.average.module.buffers(), lane.agent.buffers(), strict=True):
                        mine.copy_(theirs)
        if magnet_every and update % magnet_every == 0:
            for lane in self.lanes.values():
                lane.ppo.refresh_magnet()

    @property
    def average(self) -> torch.nn.Module | None:
        """The run's average policy (``ppo.average_decay``), laid out as :attr:`agent`; None without one."""
        if any(lane.average is None for lane in self.lanes.values()):
            return None
        return lanes_policy({name: lane.average.module for name, lane in self.lanes.items()})

    def update(self, poll: Callable[[], None] | None = None
               ) -> tuple[dict[str, torch.Tensor], dict[str | None, dict[str, torch.Tensor]]]:
        """Each lane's PPO update on its rollout, in lane order.

        Returns:
            The run's metrics (0-d device tensors: the one lane's, or the mean over the lanes of each), and
            each lane's own.
        """
        outs = {name: lane.ppo.update(lane.storage, poll) for name, lane in self.lanes.items()}
        if not self.several:
            return next(iter(outs.values())), outs
        first = next(iter(outs.values()))
        return {key: torch.stack([out[key] for out in outs.values()]).mean() for key in first}, outs

    @staticmethod
    def episode_totals(per_lane: dict[str | None, torch.Tensor]) -> torch.Tensor:
        """The run's ``[3]`` episode totals from each lane's: the first lane's count and lengths (an episode is
        a copy's), and the return summed over every lane's agents."""
        totals = iter(per_lane.values())
        episodes = next(totals).clone()
        if len(per_lane) > 1:
            episodes[1] = sum(t[1] for t in per_lane.values())
        return episodes

    # ------------------------------------------------------------------ checkpoints
    def state_dict(self) -> dict[str, Any]:
        """``model``, ``optimizer`` and ``reward_scaler`` as checkpoints hold them (see the module doc)."""
        magnets = {name: lane.ppo.magnet.state_dict() for name, lane in self.lanes.items()
                   if lane.ppo.magnet is not None}
        magnet = {} if not magnets else {"magnet": next(iter(magnets.values())) if not self.several else magnets}
        average = self.average
        if average is not None:  # laid out as "model", so that a policy loads from it alike; and each lane's count
            magnet.update(average=average.state_dict(),
                          average_count={str(name): int(lane.average.n_averaged) for name, lane in self.lanes.items()})
        if not self.several:
            lane = next(iter(self.lanes.values()))
            return {"model": lane.agent.state_dict(), "optimizer": lane.ppo.optimizer.state_dict(),
                    "reward_scaler": lane.reward_scaler.state_dict(), **magnet}
        return {"model": self.agent.state_dict(),
                "optimizer": {name: lane.ppo.optimizer.state_dict() for name, lane in self.lanes.items()},
                "reward_scaler": self._scalers().state_dict(), **magnet}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """The optimiser and reward-scaler state of :meth:`state_dict` (the weights load through
        :func:`shell.inference.load_weights`, which checks the spaces)."""
        average = self.average
        if average is not None and "average" in state:  # else (a run that had none) it starts at the next update
            average.load_state_dict(state["average"])
            for name, lane in self.lanes.items():
                lane.average.n_averaged.fill_(state["average_count"][str(name)])
        for name, lane in self.lanes.items():
            if lane.ppo.magnet is not None:  # a checkpoint without one (written before it was set): the policy's
                saved = state.get("magnet", {} if self.several else None)
                saved = saved.get(name) if self.several else saved
                lane.ppo.magnet.load_state_dict(lane.agent.state_dict() if saved is None else saved)
        if not self.several:
            lane = next(iter(self.lanes.values()))
            lane.ppo.optimizer.load_state_dict(state["optimizer"])
            lane.reward_scaler.load_state_dict(state["reward_scaler"])
            return
        for name, lane in self.lanes.items():
            lane.ppo.optimizer.load_state_dict(state["optimizer"][name])
        self._scalers().load_state_dict(state["reward_scaler"])

    def _scalers(self) -> torch.nn.ModuleDict:
        return torch.nn.ModuleDict({name: lane.reward_scaler for name, lane in self.lanes.items()})
