"""The VMAS backend: a VMAS scenario's batch of worlds on the run's device, a lane per group of agents.

``env.backend = "vmas"`` and ``env.id`` names a VMAS scenario (``"balance"``, ``"navigation"``, ``"transport"``,
...; :func:`scenario_names`); ``env.kwargs`` go to ``vmas.make_env`` (the scenario's own arguments, such as
``n_agents``, and ``continuous_actions``, true by default); ``env.num_envs`` is VMAS's ``num_envs``, its batch of
worlds, stepped as one tensor program on the run's device. From Python a factory ``Callable[[], BaseScenario]``
(your own scenario) works too (``shell.train(..., env=factory)`` with this backend).

Rows, as in the PettingZoo backend (:mod:`shell.envs.pettingzoo`): the agents are split into groups
(``env.groups``; by default agents with identical spaces, named by their common prefix); a group of M agents in
N worlds gives ``N * M`` rows, world-major (row ``i * M + j`` is agent j of world i), each row one agent's own
sample stream. Every VMAS agent acts at every step, so every row is ``valid``. What a row observes follows
``policy.agent_id`` (the agent's one-hot index in its group appended) and ``policy.critic``: ``"concat"`` gives the
critic every agent's observation of the group, then the agent's index (MAPPO's centralised critic); VMAS has no
global ``state()``, so ``"state"`` is refused. The layout is the PettingZoo backend's, so the same
:class:`shell.inference.AgentsPolicy` and export serve both.

Nothing leaves the device: observations, rewards and dones are VMAS's own tensors, reshaped and concatenated;
actions go back as tensors.

Episodes. A VMAS world ends when its scenario says it is done (a termination, shared by its agents);
``env.max_episode_steps`` truncates it (VMAS's own ``max_steps`` is not used: pass the limit there, not in
``env.kwargs``), and a truncation bootstraps from each agent's final observation (DESIGN.md, "Truncation"). A
world that ends resets in the same step (SAME_STEP): ``obs`` holds its reset observations, ``final_obs`` its last
ones. An episode's return is the sum over the group's agents of each agent's return (reported once per world,
on its first row), its length the world's steps.

Seeds. VMAS draws from the process-wide torch, NumPy and ``random`` generators, kept in one state for every VMAS
env of the process. Each env here keeps its own copy of that state (and of the device's torch generator on an
accelerator) and swaps it in around every call into VMAS, so the run's other streams, and its other VMAS envs
(training and evaluation), are untouched. ``reset(seed)`` seeds the batch's one stream from the reset seed
(a list's first, :func:`shell.seeding.base_seed`), as the torch-native backend does.

Rendering (``eval --video``): VMAS draws through pyglet, which needs an X display. Without ``$DISPLAY`` a virtual
one is started with ``Xvfb`` where it is installed; else rendering is refused in one line (ConfigError).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import subprocess
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import torch
from gymnasium import spaces

from shell.config import EnvConfig, PolicyConfig
from shell.envs.base import (
    LaneSpec,
    Rows,
    StepResult,
    check_action_space,
    no_sub_envs,
    refuse_gymnasium_settings,
    source_name,
)
from shell.envs.groups import check_groups, default_groups
from shell.errors import ConfigError, TrainingError, clipped, first_line, said
from shell.installation import install_hint
from shell.observations import ACTOR_KEY, CRITIC_KEY, obs_layout
from shell.seeding import ResetSeed, base_seed

#: keys of ``vmas.make_env`` that this backend sets itself, with what to use instead
OWN_KEYS = {"num_envs": "env.num_envs", "device": "run.device", "max_steps": "env.max_episode_steps",
            "seed": "run.seed", "dict_spaces": "nothing (rows are flat tensors)",
            "wrapper": "nothing (this backend is the wrapper)", "terminated_truncated": "nothing"}


def _vmas() -> Any:
    """The vmas package, imported now.

    Raises:
        ConfigError: it is not installed (with the pip command of the vmas extra).
    """
    try:
        import vmas
    except ModuleNotFoundError as exc:
        if exc.name != "vmas":
            raise
        raise ConfigError(f"env.backend = 'vmas' needs the vmas package; run: {install_hint('vmas')}") from None
    return vmas


def scenario_names() -> list[str]:
    """The scenarios VMAS ships (its own, its MPE ports and its debug scenarios), sorted."""
    vmas = _vmas()
    return sorted({*vmas.scenarios, *vmas.mpe_scenarios, *vmas.debug_scenarios})


def check_config(cfg: EnvConfig) -> None:
    """The backend's own rules: no gymnasium-only keys, no key this backend sets itself.

    Raises:
        ConfigError: a missing vmas package, ``env.wrappers``, ``env.atari``,
            ``env.obs_keys``, ``env.vectorization_mode = "async"``, an action mask asked for, or an ``env.kwargs``
            key of :data:`OWN_KEYS` (one line each).
    """
    refuse_gymnasium_settings(cfg)
    if cfg.vectorization_mode != "sync":
        raise ConfigError("env.vectorization_mode = 'async' does not apply to env.backend = 'vmas': its worlds are "
                          "one batch of tensors on the run's device (leave it at 'sync')")
    if cfg.action_mask not in ("auto", "none"):
        raise ConfigError(f"env.action_mask = {cfg.action_mask!r}: VMAS scenarios have no action masks")
    for key, instead in OWN_KEYS.items():
        if key in cfg.kwargs:
            raise ConfigError(f"env.kwargs.{key} is set by env.backend = 'vmas' itself; use {instead}")
    _vmas()


def _check_scenario(name: str) -> None:
    """Raises ConfigError (one line, listing VMAS's scenarios) where VMAS has no scenario ``name``. (Not in
    :func:`check_config`: a run of a user's scenario factory carries the factory's name as ``env.id``.)"""
    names = scenario_names()
    if name.removesuffix(".py") not in names:
        raise ConfigError(f"env.backend = 'vmas' has no scenario {name!r}; VMAS's scenarios: "
                          f"{', '.join(names)}")


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Runs on VMAS are evaluated on the same scenario."""
    return cfg


@contextlib.contextmanager
def _quiet_unused_kwargs(name: str, kwargs: dict[str, Any]) -> Iterator[None]:
    """Turn VMAS's warning about scenario arguments it did not use into a one-line ConfigError (VMAS says it
    will become an error; a misspelt argument would otherwise leave the scenario at its default)."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for warning in caught:
        text = str(warning.message)
        if "passed but not used by the scenario" in text:
            raise ConfigError(f"env {name!r}: {first_line(text).split(' passed')[0].replace('Scenario kwargs: ', '')} "
                              "in env.kwargs are not arguments of the scenario")
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)


def _start_display() -> subprocess.Popen | None:
    """An X display for pyglet: none needed where ``$DISPLAY`` is set; else a virtual one (``Xvfb``), whose
    process is returned (``$DISPLAY`` now names it).

    Raises:
        ConfigError: no ``$DISPLAY`` and no ``Xvfb``, or Xvfb did not start (one line).
    """
    if os.environ.get("DISPLAY"):
        return None
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        raise ConfigError(f"rendering env.backend = 'vmas' ({said('video')}) needs an X display: VMAS draws through "
                          "pyglet, and $DISPLAY is not set and Xvfb is not installed (Debian: apt-get install xvfb)")
    read, write = os.pipe()
    proc = subprocess.Popen([xvfb, "-displayfd", str(write), "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            pass_fds=(write,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    os.close(write)
    with os.fdopen(read) as pipe:
        number = pipe.readline().strip()
    if not number.isdigit():
        proc.kill()
        proc.wait()
        raise ConfigError(f"rendering env.backend = 'vmas' ({said('video')}) needs an X display: Xvfb did not start")
    os.environ["DISPLAY"] = f":{number}"
    return proc


def _gymnasium_space(space: Any) -> spaces.Space:
    """VMAS's space of one agent (an old ``gym`` space) as gymnasium's.

    Raises:
        ConfigError: a space other than Box, Discrete, MultiDiscrete or MultiBinary (one line).
    """
    kind = type(space).__name__
    if kind == "Box":
        return spaces.Box(np.asarray(space.low), np.asarray(space.high), space.shape, space.dtype)
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec))
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    raise ConfigError(f"a VMAS space {space} is not served: Box, Discrete, MultiDiscrete or MultiBinary")


class VmasLaneEnv:
    """A VMAS scenario's N worlds as a :class:`shell.envs.base.LaneEnv` with a lane per group of agents (see the
    module doc): :meth:`reset` returns ``{group: Rows}``, :meth:`step` takes ``{group: action [N*M, ...]}``.

    Args:
        scenario: a VMAS scenario name, or a ``BaseScenario`` (a factory's).
        cfg: the env config (``kwargs``, ``groups``, ``max_episode_steps``).
        num_envs: N, VMAS's batch of worlds.
        device: the run's device (where VMAS steps).
        policy: the policy config (``agent_id``, ``critic``); None = the defaults.
        render_mode: ``"rgb_array"`` to render world 0 (:meth:`render`), else None.
        name: the env's name for messages.

    Raises:
        ConfigError: VMAS refused the scenario or its arguments, groups that do not cover every agent or mix
            spaces, an observation that is not a 1-D Box, an unsupported action space, ``policy.critic = "state"``,
            or rendering without a display.
    """

    def __init__(self, scenario: Any, cfg: EnvConfig, num_envs: int, device: torch.device,
                 policy: PolicyConfig | None = None, render_mode: str | None = None, name: str | None = None):
        vmas = _vmas()
        from vmas.simulator.environment import Environment

        self.name = name or str(scenario)
        self.device = torch.device(device)
        self.copies = num_envs
        self.render_mode = render_mode
        self._shared = Environment.vmas_random_state  # VMAS's one stream for all its envs (a list, changed in place)
        self._streams = self._seeded(0)
        self._display: subprocess.Popen | None = None
        self.env: Any = None
        policy = policy or PolicyConfig()
        if policy.critic == "state":
            raise ConfigError("policy.critic = 'state' needs an env with a global state(); VMAS scenarios have none "
                              "(use 'concat', MAPPO's centralised critic, or 'local')")
        kwargs = dict(cfg.kwargs)
        continuous = kwargs.pop("continuous_actions", True)
        try:
            with self._own_streams(), _quiet_unused_kwargs(self.name, kwargs):
                self.env = vmas.make_env(scenario, num_envs=num_envs, device=self.device, continuous_actions=continuous,
                                         max_steps=None, seed=0, **kwargs)
        except ConfigError:
            raise
        except Exception as exc:
            context = f" (env.kwargs = {clipped(repr(dict(cfg.kwargs)), 40)})" if cfg.kwargs else ""
            raise ConfigError(f"cannot make VMAS scenario {self.name!r}: {type(exc).__name__}: "
                              f"{clipped(first_line(exc), 72)}{context}") from None
        try:
            self._build_lanes(cfg, policy)
            if render_mode is not None:
                if render_mode != "rgb_array":
                    raise ConfigError(f"env.backend = 'vmas' renders 'rgb_array' frames, not {render_mode!r}")
                self._display = _start_display()
        except ConfigError:
            self.close()
            raise
        #: the time limit of one episode (env.max_episode_steps; VMAS's own max_steps is not used)
        self.max_episode_steps = cfg.max_episode_steps
        self.render_fps = max(1, round(1.0 / float(self.env.world.dt)))
        self.elapsed = torch.zeros(num_envs, dtype=torch.long, device=self.device)
        self._return = torch.zeros(num_envs, len(self.env.agents), device=self.device)
        self.steps = 0

    # -- streams
    def _seeded(self, seed: int) -> list[Any]:
        """VMAS's stream state (torch CPU, NumPy, ``random``; then the device's torch generator on an
        accelerator) seeded with ``seed``."""
        streams = [torch.Generator().manual_seed(seed).get_state(), np.random.RandomState(seed).get_state(),
                   random.Random(seed).getstate()]
        if self.device.type == "cuda":
            streams.append(torch.Generator(self.device).manual_seed(seed).get_state())
        return streams

    @contextlib.contextmanager
    def _own_streams(self) -> Iterator[None]:
        """This env's streams in VMAS's shared state (and the device's generator) while VMAS runs."""
        outer = list(self._shared)
        self._shared[:] = self._streams[:3]
        cuda = self.device.type == "cuda"
        if cuda:
            outer_cuda = torch.cuda.get_rng_state(self.device)
            torch.cuda.set_rng_state(self._streams[3], self.device)
        try:
            yield
        finally:
            self._streams[:3] = list(self._shared)
            self._shared[:] = outer
            if cuda:
                self._streams[3] = torch.cuda.get_rng_state(self.device)
                torch.cuda.set_rng_state(outer_cuda, self.device)

    def _call(self, what: str, call: Callable[[], Any]) -> Any:
        """A call into VMAS with this env's streams; what it raises ends training in one line (TrainingError)."""
        try:
            with self._own_streams():
                return call()
        except Exception as exc:
            raise TrainingError(f"env {self.name} raised {type(exc).__name__}{what}: {first_line(exc)}") from exc

    # -- lanes
    def _build_lanes(self, cfg: EnvConfig, policy: PolicyConfig) -> None:
        env = self.env
        names = [agent.name for agent in env.agents]
        obs_spaces = {a: _gymnasium_space(x) for a, x in zip(names, env.observation_space, strict=True)}
        act_spaces = {a: _gymnasium_space(x) for a, x in zip(names, env.action_space, strict=True)}
        groups = {g: list(m) for g, m in cfg.groups.items()} if cfg.groups else \
            default_groups(names, obs_spaces.__getitem__, act_spaces.__getitem__)
        check_groups(groups, names, obs_spaces.__getitem__, act_spaces.__getitem__, self.name)
        self.groups = groups
        self._index = {g: [names.index(a) for a in members] for g, members in groups.items()}
        self.agent_id, self.critic = policy.agent_id, policy.critic
        self._specs: dict[str, LaneSpec] = {}
        self._own_size: dict[str, int] = {}
        for g, members in groups.items():
            own, action_space = obs_spaces[members[0]], act_spaces[members[0]]
            if not (isinstance(own, spaces.Box) and len(own.shape) == 1):
                raise ConfigError(f"env {self.name!r}: the agents of group {g!r} observe {own}; env.backend = 'vmas' "
                                  "serves flat (1-D Box) observations")
            check_action_space(action_space)
            view = self._view_space(own, len(members))
            obs_layout(view)
            self._own_size[g] = int(own.shape[0])
            self._specs[g] = LaneSpec(view, action_space, self.copies * len(members), len(members), list(members))
        self.lanes = self._specs
        self._ids = {g: torch.eye(len(m), device=self.device) for g, m in groups.items()}
        self._low_high = {g: (torch.as_tensor(s.action_space.low, device=self.device),
                              torch.as_tensor(s.action_space.high, device=self.device))
                          for g, s in self._specs.items() if isinstance(s.action_space, spaces.Box)}

    def _view_space(self, own: spaces.Box, M: int) -> spaces.Space:
        """One row's observation space as the policy sees it (the PettingZoo backend's layout)."""
        one_hot_low, one_hot_high = np.zeros(M, np.float32), np.ones(M, np.float32)
        actor: spaces.Space = own
        if self.agent_id:
            actor = spaces.Box(np.concatenate([own.low, one_hot_low]).astype(np.float32),
                               np.concatenate([own.high, one_hot_high]).astype(np.float32), dtype=np.float32)
        if self.critic == "local":
            return actor
        critic = spaces.Box(-np.inf, np.inf, (M * int(own.shape[0]) + M,), np.float32)
        return spaces.Dict({ACTOR_KEY: actor, CRITIC_KEY: critic})

    def _rows(self, obs: list[torch.Tensor]) -> dict[str, Any]:
        """VMAS's per-agent observations ``[N, S]`` -> each group's rows ``[N*M, ...]`` as the policy sees them."""
        N = self.copies
        out = {}
        for g, index in self._index.items():
            M = len(index)
            own = torch.stack([obs[k] for k in index], dim=1).float()  # [N, M, S]
            ids = self._ids[g].expand(N, M, M)
            actor = torch.cat((own, ids), dim=-1) if self.agent_id else own
            actor = actor.reshape(N * M, -1)
            if self.critic == "local":
                out[g] = actor
                continue
            shared = own.reshape(N, 1, M * own.shape[-1]).expand(N, M, M * own.shape[-1])
            out[g] = {ACTOR_KEY: actor, CRITIC_KEY: torch.cat((shared, ids), dim=-1).reshape(N * M, -1)}
        return out

    @staticmethod
    def _has_nan(obs: list[torch.Tensor]) -> torch.Tensor:
        """A 0-d bool tensor: whether any agent's observation ``[N, S]`` holds NaN or an infinity (no device
        sync): the policy would act on either with NaN actions."""
        return torch.stack([(~torch.isfinite(o)).any() for o in obs]).any()

    def _check_finite(self, obs: list[torch.Tensor], nan: bool, what: str) -> None:
        """Refuse a NaN observation (``nan``: :meth:`_has_nan`'s answer) before the policy acts on it: its NaN
        actions would reach VMAS, whose own assertion names neither.

        Raises:
            TrainingError: one line naming the first agent that observed NaN and the step.
        """
        if not nan:
            return
        agent, o = next((a.name, o) for a, o in zip(self.env.agents, obs, strict=True)
                        if bool((~torch.isfinite(o)).any()))
        value = "NaN" if bool(torch.isnan(o).any()) else "an infinity"
        raise TrainingError(f"env {self.name}: agent {agent!r} observed {value}{what} (at vector step {self.steps})")

    @staticmethod
    def _where(done_rows: torch.Tensor, fresh: Any, old: Any) -> Any:
        if isinstance(fresh, dict):
            return {k: torch.where(done_rows[:, None], fresh[k], old[k]) for k in fresh}
        return torch.where(done_rows[:, None], fresh, old)

    # -- the LaneEnv interface
    def mask_sources(self) -> dict[str, str | None]:
        """VMAS scenarios have no action masks."""
        return dict.fromkeys(self.groups)

    def _valid(self, g: str) -> torch.Tensor:
        return torch.ones(self._specs[g].num_envs, dtype=torch.bool, device=self.device)

    def reset(self, seed: ResetSeed | None = None) -> dict[str, Rows]:
        """Reset every world; the batch's one stream is seeded with the reset seed (a list's first).

        Raises:
            TrainingError: VMAS raised.
        """
        seed = base_seed(seed)
        if seed is not None:
            self._streams = self._seeded(seed)
        obs = self._call(" on reset", lambda: self.env.reset())
        self._check_finite(obs, bool(self._has_nan(obs)), " on reset")
        self.elapsed.zero_()
        self._return.zero_()
        rows = self._rows(obs)
        return {g: Rows(rows[g], self._valid(g), None) for g in self.groups}

    def _env_actions(self, actions: dict[str, torch.Tensor]) -> list[torch.Tensor]:
        """Each group's ``[N*M, ...]`` actions -> VMAS's list of ``[N, A]`` per agent."""
        N = self.copies
        per_agent: list[Any] = [None] * len(self.env.agents)
        for g, index in self._index.items():
            action = actions[g]
            space = self._specs[g].action_space
            if isinstance(space, spaces.Box):
                low, high = self._low_high[g]
                action = torch.clamp(action.reshape(action.shape[0], -1).float(), low.reshape(-1), high.reshape(-1))
            action = action.reshape(N, len(index), *action.shape[1:])
            for j, k in enumerate(index):
                per_agent[k] = action[:, j] if action.dim() > 2 else action[:, j, None]
        return per_agent

    def step(self, actions: dict[str, torch.Tensor]) -> dict[str, StepResult]:
        """One step of every world: each group's ``[N*M, ...]`` actions -> each group's :class:`StepResult`.
        Worlds that end (done, or ``env.max_episode_steps``) reset in the same step.

        Raises:
            TrainingError: VMAS raised.
        """
        per_agent = self._env_actions(actions)
        obs, rewards, done, _ = self._call("", lambda: self.env.step(per_agent))
        self.steps += 1
        reward = torch.stack(rewards, dim=1).float()  # [N, n_agents]
        self.elapsed += 1
        terminated = done.bool()
        truncated = ~terminated & (self.elapsed >= self.max_episode_steps) if self.max_episode_steps \
            else torch.zeros_like(terminated)
        ended = terminated | truncated
        episode_return = self._return + reward
        episode_length = self.elapsed.clone()
        final = self._rows(obs)
        any_ended, any_truncated, nan = torch.stack((ended.any(), truncated.any(), self._has_nan(obs))).tolist()
        self._check_finite(obs, nan, "")  # one device sync for the three
        current = final
        if any_ended:
            def reset_ended() -> list[torch.Tensor]:
                if bool(ended.all()):
                    return self.env.reset()
                for i in torch.nonzero(ended).flatten().tolist():
                    self.env.reset_at(i, return_observations=False)
                return self.env.get_from_scenario(get_observations=True, get_infos=False, get_rewards=False,
                                                  get_dones=False)[0]

            fresh_obs = self._call(" on reset", reset_ended)
            self._check_finite(fresh_obs, bool(self._has_nan(fresh_obs)), " on reset")
            fresh = self._rows(fresh_obs)
            current = {g: self._where(ended.repeat_interleave(len(i)), fresh[g], final[g])
                       for g, i in self._index.items()}
        self.elapsed = torch.where(ended, 0, self.elapsed)
        self._return = torch.where(ended[:, None], 0.0, episode_return)
        out = {}
        for g, index in self._index.items():
            M = len(index)
            # an episode is reported once per world, on its first row: the group's return (summed over its agents)
            first_row = torch.zeros(self.copies, M, dtype=torch.bool, device=self.device)
            first_row[:, 0] = ended
            group_return = torch.zeros(self.copies, M, device=self.device)
            group_return[:, 0] = torch.where(ended, episode_return[:, index].sum(dim=1), 0.0)
            out[g] = StepResult(
                obs=current[g], reward=reward[:, index].reshape(-1),
                terminated=terminated.repeat_interleave(M), truncated=truncated.repeat_interleave(M),
                # the bootstrap needs final observations only where a world was truncated
                final_obs=final[g] if any_truncated else None, episode_done=first_row.reshape(-1),
                episode_return=group_return.reshape(-1), episode_length=episode_length.repeat_interleave(M),
                episode_start=ended.repeat_interleave(M), valid=self._valid(g), action_mask=None, ended=ended)
        return out

    def render(self) -> Any:
        """World 0's frame (``render_mode = "rgb_array"``): ``[H, W, 3]`` uint8."""
        if self.render_mode is None:
            return None
        return self._call(" on render", lambda: self.env.render(mode="rgb_array", env_index=0))

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        raise no_sub_envs("vmas", f"call({name!r})")

    def get_attr(self, name: str) -> Any:
        raise no_sub_envs("vmas", f"get_attr({name!r})")

    def set_attr(self, name: str, values: Any) -> None:
        raise no_sub_envs("vmas", f"set_attr({name!r})")

    def close(self) -> None:
        """Close the viewer and a virtual display this env started; never raises."""
        viewer = getattr(self.env, "viewer", None)
        with contextlib.suppress(Exception):
            if viewer is not None:
                viewer.close()
        if self._display is not None:
            self._display.terminate()
            with contextlib.suppress(Exception):
                self._display.wait(timeout=5)
            os.environ.pop("DISPLAY", None)
            self._display = None


def _check_wrappers(wrappers: list | None) -> None:
    if wrappers:
        raise ConfigError("wrappers need env.backend = 'gymnasium'; a VMAS scenario takes none")


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> VmasLaneEnv:
    """The scenario ``env.id`` in ``num_envs`` worlds on ``device``.

    Raises:
        ConfigError: see :func:`check_config` and :class:`VmasLaneEnv`; a scenario VMAS does not have; ``wrappers``
            (none apply).
    """
    check_config(cfg)
    _check_scenario(cfg.id)
    _check_wrappers(wrappers)
    return VmasLaneEnv(cfg.id.removesuffix(".py"), cfg, num_envs, device, policy, render_mode, cfg.id)


def from_factory(factory: Callable[[], Any], cfg: EnvConfig, num_envs: int, device: torch.device,
                 render_mode: str | None = None, wrappers: list | None = None,
                 policy: PolicyConfig | None = None) -> VmasLaneEnv:
    """A user's scenario: ``factory()`` returns a ``vmas.simulator.scenario.BaseScenario`` (made afresh for each
    env, since VMAS builds its world into the scenario).

    Raises:
        ConfigError: as :func:`make`; the factory raised or made no ``BaseScenario``.
    """
    _check_wrappers(wrappers)
    _vmas()
    from vmas.simulator.scenario import BaseScenario

    name = source_name(factory)
    try:
        scenario = factory()
    except Exception as exc:
        raise ConfigError(f"cannot make env {name!r}: {type(exc).__name__}: {clipped(first_line(exc), 72)}") from None
    if not isinstance(scenario, BaseScenario):
        raise ConfigError(f"env {name!r} made a {type(scenario).__name__}; env.backend = 'vmas' takes a factory of "
                          "vmas.simulator.scenario.BaseScenario")
    return VmasLaneEnv(scenario, cfg, num_envs, device, policy, render_mode, name)
