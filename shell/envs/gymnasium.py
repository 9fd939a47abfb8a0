"""The gymnasium backend: gymnasium's vector envs (sync or async, SAME_STEP autoreset) built from an
id, a user's factory or given ready, behind :class:`GymVecEnv`, which the C++ backends use too.

Also the per-sub-env wrappers every gymnasium-built env gets: the user's ``env.wrappers``, the
``env.obs_keys`` filter and the Atari chain.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
import threading
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from gymnasium.vector import AutoresetMode
from gymnasium.vector.async_vector_env import AsyncState

from shell.actions import to_env_action
from shell.config import EnvConfig, PolicyConfig
from shell.envs import masks
from shell.envs.base import StepResult, check_action_space, source_name
from shell.envs.shards import ShardedVectorEnv, ShareError
from shell.errors import ConfigError, TrainingError, clipped, first_line
from shell.installation import install_hint
from shell.observations import Obs, ObservationError, obs_layout, stack_final_obs, to_tensor
from shell.seeding import ResetSeed
from shell.workers import become_worker, how_it_ended, usable_cpus

EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "moviepy": "video", "ale_py": "atari", "minigrid": "minigrid",
          "cv2": "atari", "opencv": "atari"}


def _signal_free_worker(parent_pid: int, death_signal: bool, *args: Any) -> None:
    """gymnasium's AsyncVectorEnv worker, with SIGINT and SIGTERM ignored, that ends with its parent.

    Ctrl-C signals the whole process group. A worker that took it would die with a
    KeyboardInterrupt, print its traceback and break the next ``step`` before the main
    process could save a checkpoint. The main process alone answers signals and then
    closes its workers. A worker whose parent died, even by ``kill -9``, is killed with it
    (:func:`shell.workers.become_worker`). gymnasium's own way, the closed pipe, ends them in a
    chain (each holds the parent's ends of the pipes of those forked before it) that stops at
    the first worker whose error report does not fit into the unread error queue (about 80 of them)
    or stderr (a pipe no one reads). A worker whose pipe breaks (the main process closed it, or is
    closing after another worker was killed) ends quietly: the main process reports the one line.
    """
    from gymnasium.vector.async_vector_env import _async_worker

    become_worker(parent_pid, death_signal)
    try:
        _async_worker(*args)
    except (OSError, EOFError):  # its report of the broken pipe could not be sent: nothing to say
        pass


# Packages whose import registers env ids, and the extra that installs each.
ENV_PACKAGES = {"ALE/": ("ale_py", "atari"), "MiniGrid-": ("minigrid", "minigrid"), "BabyAI-": ("minigrid", "minigrid")}


def import_env_package(env_id: str) -> None:
    """Import (and register) the package that provides ``env_id``'s namespace, or name its extra."""
    for prefix, (module, extra) in ENV_PACKAGES.items():
        if env_id.startswith(prefix):
            try:
                package = importlib.import_module(module)
            except ImportError:
                raise ConfigError(f"env {env_id!r} needs the {module} package; run: {install_hint(extra)}") from None
            if module == "ale_py":
                gym.register_envs(package)


def atari_wrappers(cfg: EnvConfig) -> list[Callable[[gym.Env], gym.Env]]:
    """The standard Atari chain (Machado et al. 2018; Mnih et al. 2015), from gymnasium's own wrappers.

    ``AtariPreprocessing``: up to 30 no-op starts, frame skip 4 with max-pooling of the last two
    frames, 84x84 greyscale; then ``FrameStackObservation`` of ``env.frame_stack`` frames, giving
    uint8 ``[frame_stack, 84, 84]``. A lost life is not a termination here: with
    ``env.terminal_on_life_loss`` the env layer ends the episode for training only and the game
    goes on (:class:`GymVecEnv`). The reward is the game score (``env.sign_reward`` clips it for
    training only, in the runner).
    """
    from gymnasium.wrappers import AtariPreprocessing, FrameStackObservation

    return [
        lambda env: AtariPreprocessing(env, noop_max=30, frame_skip=4, screen_size=84, terminal_on_life_loss=False,
                                       grayscale_obs=True, scale_obs=False),
        lambda env: FrameStackObservation(env, cfg.frame_stack),
    ]


def import_object(path: str, what: str) -> Any:
    """The object named ``"module.path:Name"`` (``Name`` may be dotted: ``"module:Outer.Inner"``).

    Raises:
        ConfigError: one line naming ``what``, if the module cannot be imported (any error while
            importing it) or has no such attribute.
    """
    module_name, _, attr = path.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:
        msg = first_line(exc)
        raise ConfigError(f"{what}: cannot import {module_name!r} ({type(exc).__name__}: {msg}); it must be "
                          "importable, e.g. on PYTHONPATH") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ConfigError(f"{what}: module {module_name!r} has no {attr!r}")
        obj = getattr(obj, part)
    return obj


def user_wrappers(cfg: EnvConfig) -> list[Callable[[gym.Env], gym.Env]]:
    """``env.wrappers`` as callables env -> env, in the listed order (the first wraps innermost).

    Each entry's ``class`` is imported now; it is called as ``cls(env, **kwargs)`` when a sub-env
    is made. Any class or function that takes the env and the entry's kwargs and returns a
    ``gymnasium.Env`` will do.

    Raises:
        ConfigError: at once, for a class that cannot be imported or is not callable; when a sub-env
            is made, for a call that raises or returns something that is not a ``gymnasium.Env``
            (one line naming ``env.wrappers[i]``).
    """
    wrappers: list[Callable[[gym.Env], gym.Env]] = []
    for i, entry in enumerate(cfg.wrappers):
        name, kwargs = entry["class"], dict(entry.get("kwargs", {}))
        what = f"env.wrappers[{i}] ({name})"
        cls = import_object(name, what)
        if not callable(cls):
            raise ConfigError(f"{what} is a {type(cls).__name__}, not a wrapper class")
        wrappers.append(_user_wrapper(cls, kwargs, what))
    return wrappers


def _user_wrapper(cls: Callable[..., gym.Env], kwargs: dict[str, Any], what: str) -> Callable[[gym.Env], gym.Env]:
    def wrap(env: gym.Env) -> gym.Env:
        try:
            wrapped = cls(env, **kwargs)
        except Exception as exc:
            msg = first_line(exc)
            raise ConfigError(f"{what} cannot wrap the env with kwargs = {kwargs!r}: {type(exc).__name__}"
                              f"{': ' + msg if msg else ''}") from None
        if not isinstance(wrapped, gym.Env):
            raise ConfigError(f"{what} returned an object of type {type(wrapped).__name__}, not a gymnasium.Env")
        return wrapped

    return wrap


def sub_env_wrappers(cfg: EnvConfig) -> list[Callable[[gym.Env], gym.Env]]:
    """What wraps each sub-env before vectorising, innermost first: the user's ``env.wrappers``
    (around what ``gymnasium.make`` returns), then ``FilterObservation`` of ``env.obs_keys``, then
    the Atari chain when ``env.atari``.

    The user's wrappers come first so that they define the env the rest of the configuration talks
    about: ``env.obs_keys`` names keys of the observation they return, as ``env.id`` and
    ``env.kwargs`` name what ``gymnasium.make`` builds (the RL Zoo's ``env_wrapper`` also wraps
    the env straight after ``make``).

    Raises:
        ConfigError: see :func:`user_wrappers`.
    """
    wrappers = user_wrappers(cfg)
    if cfg.obs_keys is not None:
        keys = list(cfg.obs_keys)
        wrappers.append(lambda env: gym.wrappers.FilterObservation(env, keys))
    if cfg.atari:
        wrappers += atari_wrappers(cfg)
    return wrappers


def _vector_kwargs(cfg: EnvConfig) -> dict[str, Any]:
    """What every vector env this backend builds is given: SAME_STEP autoreset, and for async workers
    the signal-free worker (:func:`_signal_free_worker`)."""
    kwargs: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}
    if cfg.vectorization_mode == "async":
        kwargs["worker"] = functools.partial(_signal_free_worker, os.getpid(),
                                             threading.current_thread() is threading.main_thread())
    return kwargs


def make_vector_env(cfg: EnvConfig, num_envs: int, render_mode: str | None = None,
                    wrappers: list | None = None) -> gym.vector.VectorEnv:
    """``gymnasium.make_vec`` of ``cfg.id`` with the config's kwargs, time limit and wrappers, SAME_STEP; with
    ``env.vectorization_mode = "async"`` and ``env.shares`` set, the same sub-envs in a
    :class:`shell.envs.shards.ShardedVectorEnv` of that many shares.

    Raises:
        ConfigError: one line: an unknown id, a missing optional extra (naming the pip command), a
            kwarg the env refuses, an assert inside the env, or a wrapper that cannot be built.
    """
    import_env_package(cfg.id)
    kwargs: dict[str, Any] = dict(cfg.kwargs)
    if cfg.atari:
        kwargs.setdefault("frameskip", 1)  # AtariPreprocessing does the skipping
    all_wrappers = sub_env_wrappers(cfg) + list(wrappers or [])
    if all_wrappers:
        kwargs["wrappers"] = all_wrappers
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if render_mode is not None:
        kwargs["render_mode"] = render_mode
    try:
        if _sharded(cfg):  # one sub-env through make_vec, for its maker and spec; then the shares of them
            probe = gym.make_vec(cfg.id, num_envs=1, vectorization_mode="sync",
                                 vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP}, **kwargs)
            make, spec = probe.env_fns[0], probe.spec
            probe.close()
            return _sharded_env(make, num_envs, cfg, spec=spec, name=cfg.id)
        return gym.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode=cfg.vectorization_mode,
            vector_kwargs=_vector_kwargs(cfg),
            **kwargs,
        )
    except ConfigError:  # a user wrapper that could not be built: already one line naming it
        raise
    except ShareError as exc:  # a worker could not make its sub-envs: already one line naming the env
        raise ConfigError(str(exc)) from None
    except gym.error.DependencyNotInstalled as exc:
        extra = next((e for k, e in EXTRAS.items() if k in str(exc).lower()), None)
        hint = install_hint(extra) if extra else "install the package it names"
        raise ConfigError(f"env {cfg.id!r} needs a missing optional dependency; run: {hint}") from None
    except Exception as exc:  # an env that cannot be built from this config: bad id, kwarg, or an assert inside it
        msg = clipped(first_line(exc), 72)  # gymnasium's own message quotes the kwargs whole
        if not msg or isinstance(exc, AssertionError):
            msg = type(exc).__name__ + (f": {msg}" if msg else "")
        context = [f"env.kwargs = {clipped(repr(dict(cfg.kwargs)), 40)}"] if cfg.kwargs else []
        if cfg.obs_keys is not None:
            context.append(f"env.obs_keys = {list(cfg.obs_keys)!r}")
        where = f" ({'; '.join(context)})" if context and not isinstance(exc, gym.error.Error) else ""
        module = cfg.id.split(":")[0] if ":" in cfg.id else None
        if isinstance(exc, gym.error.UnregisteredEnv) and _names_pettingzoo_module(cfg.id):
            raise ConfigError(f"env {cfg.id!r} names a PettingZoo module, not a gymnasium id; set "
                              "env.backend = 'pettingzoo'") from None
        if module and f"No module named '{module.split('.')[0]}'" in msg:  # "my_module:MyEnv-v0" not importable
            msg = (f"module {module!r} cannot be imported; put the folder that holds it on PYTHONPATH "
                   f"(or run from that folder)")
        raise ConfigError(f"cannot make env {cfg.id!r}: {msg}{where}") from None


def _sharded(cfg: EnvConfig) -> bool:
    """Whether the config's sub-envs are stepped in shares (:class:`shell.envs.shards.ShardedVectorEnv`)."""
    return cfg.vectorization_mode == "threads" or (cfg.vectorization_mode == "async" and cfg.shares is not None)


def share_count(cfg: EnvConfig) -> int:
    """How many shares the sub-envs are stepped in: ``env.shares``, else (threads) one per CPU this process may
    use."""
    return cfg.shares if cfg.shares is not None else usable_cpus()


def _sharded_env(make: Callable[[], gym.Env], num_envs: int, cfg: EnvConfig, **kwargs: Any) -> ShardedVectorEnv:
    """The config's sub-envs of ``make`` in shares: :func:`share_count` of them, in threads or processes."""
    return ShardedVectorEnv(make, num_envs, share_count(cfg), threads=cfg.vectorization_mode == "threads", **kwargs)


def _names_pettingzoo_module(env_id: str) -> bool:
    """Whether ``env_id``, which gymnasium does not know, names a PettingZoo env module (``module`` or
    ``module:name``): one of the mpe2 and pettingzoo packages (installed or not), a module with
    ``parallel_env``, or ``name`` a ParallelEnv class. Asked only to word an error."""
    module_name, _, attr = env_id.partition(":")
    parts = module_name.split(".")
    if not all(part.isidentifier() for part in parts):
        return False
    if parts[0] in ("mpe2", "pettingzoo"):
        return True
    try:
        if importlib.util.find_spec(parts[0]) is None:
            return False
        module = importlib.import_module(module_name)
    except Exception:
        return False
    if callable(getattr(module, "parallel_env", None)):
        return True
    obj = getattr(module, attr, None) if attr.isidentifier() else None
    return isinstance(obj, type) and any(c.__name__ == "ParallelEnv" and c.__module__.startswith("pettingzoo")
                                         for c in obj.__mro__)


def autoreset_mode(env: gym.vector.VectorEnv) -> AutoresetMode:
    """A vector env's ``metadata["autoreset_mode"]`` (gymnasium assumes NEXT_STEP when it is missing).

    Raises:
        ConfigError: DISABLED (nothing would reset an ended episode), or not an AutoresetMode.
    """
    mode = env.metadata.get("autoreset_mode", AutoresetMode.NEXT_STEP)
    if isinstance(mode, str):
        mode = AutoresetMode(mode) if mode in {m.value for m in AutoresetMode} else mode
    if not isinstance(mode, AutoresetMode):
        raise ConfigError(f"the vector env's metadata['autoreset_mode'] = {mode!r} is not a gymnasium AutoresetMode")
    if mode == AutoresetMode.DISABLED:
        raise ConfigError("the vector env has autoreset_mode DISABLED; training needs SAME_STEP or NEXT_STEP "
                          "(gymnasium.make_vec(..., vector_kwargs={'autoreset_mode': AutoresetMode.SAME_STEP}))")
    return mode


def vec_from_factory(factory: Callable[[], gym.Env], cfg: EnvConfig, num_envs: int, render_mode: str | None = None,
                     wrappers: list | None = None) -> gym.vector.VectorEnv:
    """``num_envs`` copies of ``factory()`` in a gymnasium vector env (``env.vectorization_mode``, SAME_STEP),
    each wrapped as a config-built sub-env is (``env.obs_keys``, the Atari chain, then ``wrappers``).

    ``render_mode`` (for video) is passed to the factory as a keyword, as gymnasium.make passes it.

    Raises:
        ConfigError: the factory raised (one line).
    """
    all_wrappers = sub_env_wrappers(cfg) + list(wrappers or [])

    def make() -> gym.Env:
        env = factory(render_mode=render_mode) if render_mode is not None else factory()
        if not isinstance(env, gym.Env):
            raise ConfigError(f"the env factory {source_name(factory)!r} returned "
                              f"{type(env).__name__}, not a gymnasium.Env")
        if cfg.max_episode_steps is not None:
            env = gym.wrappers.TimeLimit(env, cfg.max_episode_steps)
        for wrap in all_wrappers:
            env = wrap(env)
        return env

    try:
        make().close()  # fail here, in the main process, with one line
    except ConfigError:
        raise
    except Exception as exc:
        raise ConfigError(f"the env factory {source_name(factory)!r} raised "
                          f"{type(exc).__name__}: {first_line(exc)}") from None
    if _sharded(cfg):
        try:
            return _sharded_env(make, num_envs, cfg, name=source_name(factory))
        except ShareError as exc:
            raise ConfigError(str(exc)) from None
    vector_class = gym.vector.AsyncVectorEnv if cfg.vectorization_mode == "async" else gym.vector.SyncVectorEnv
    return vector_class([make] * num_envs, **_vector_kwargs(cfg))


def sub_env_time_limit(vector_env: gym.vector.VectorEnv) -> int | None:
    """The time limit of a gymnasium Sync/AsyncVectorEnv's first sub-env: its outermost ``TimeLimit``'s
    ``max_episode_steps``, else its spec's; None when it has neither, or for another kind of vector env.

    Asked through the vector env's ``call`` (the sub-envs of an async one live in its workers), with
    names every env has, so that no worker sees an exception (an async worker ends on one).
    """
    if not isinstance(vector_env, gym.vector.SyncVectorEnv | gym.vector.AsyncVectorEnv | ShardedVectorEnv):
        return None
    try:
        if vector_env.call("has_wrapper_attr", "_max_episode_steps")[0]:
            limit = vector_env.get_attr("_max_episode_steps")[0]
        else:
            limit = getattr(vector_env.get_attr("spec")[0], "max_episode_steps", None)
    except Exception:  # a sub-env that cannot say: no limit known, as for an env without one
        return None
    return limit if isinstance(limit, int) and not isinstance(limit, bool) and limit > 0 else None


class GymVecEnv:
    """A gymnasium-API vector env that speaks tensors: built from the config's id, from a factory,
    given ready, or a C++ backend's.

    Sub-env i is seeded with ``seed + i`` at the first reset.

    SAME_STEP autoreset (what this library builds): the final observation of an ended episode
    comes from ``info["final_obs"]`` (stacked under ``info["_final_obs"]``), so no dummy
    transition enters a rollout.

    NEXT_STEP autoreset (gymnasium's default; a user's ready vector env; EnvPool): a sub-env whose
    episode ended resets on its next step, which ignores the action and returns the first
    observation of the new episode with reward 0. That step is a *dummy*. Here, the step that
    ends an episode returns its final observation as ``obs`` (and as ``final_obs`` for a
    truncation's bootstrap), and :attr:`valid` is false for the sub-envs whose next step is a
    dummy, so that the rollout keeps those steps out of GAE, the losses, the normalisers and the
    episode statistics (gymnasium's RecordEpisodeStatistics skips them itself). The dummy step's
    ``episode_start`` marks the reset observation it returns.

    The C++ backends (ale, envpool) hand their vector envs to this class too; their modules build
    and reseed them.

    Action masks (``env.action_mask``, shell/envs/masks.py): after every reset and step,
    :attr:`action_mask` holds the ``[N, A]`` bool mask of the observation to act on next, read by the
    convention :attr:`mask_source` names (``"info"``, ``"obs"``, ``"method"``; None: no masks). With
    ``"obs"`` the ``"action_mask"`` key is left out of :attr:`observation_space` and of the observations.
    A NEXT_STEP source's pending dummy rows get an all-true mask (the dummy step ignores the action).

    Args:
        vector_env: the ``gymnasium.vector.VectorEnv`` (SAME_STEP or NEXT_STEP, read from its
            ``metadata["autoreset_mode"]``); closed with this object.
        cfg: the env config (``terminal_on_life_loss``, ``obs_keys``, ``max_episode_steps``).
        device: where the tensors go.
        name: the env's name for messages where the vector env's spec has none (the config's id).

    Raises:
        ConfigError: an unsupported space or autoreset mode (the vector env is closed).
    """

    def __init__(self, vector_env: gym.vector.VectorEnv, cfg: EnvConfig, device: torch.device,
                 name: str | None = None, sub_envs: bool = True):
        self._id = name or source_name(vector_env)  # for messages, where the vector env has no spec id
        self._has_sub_envs = sub_envs  # False for a C++ pool (ale, envpool): no gymnasium sub-envs
        try:
            mode = autoreset_mode(vector_env)
        except ConfigError:
            vector_env.close()
            raise
        num_envs = vector_env.num_envs
        self.next_step = mode == AutoresetMode.NEXT_STEP
        self._pending = np.zeros(num_envs, dtype=bool)  # NEXT_STEP: sub-envs whose next step is a dummy
        self.env = gym.wrappers.vector.RecordEpisodeStatistics(vector_env)
        self.life_loss = cfg.terminal_on_life_loss
        if self.life_loss and self.next_step:
            self.env.close()
            raise ConfigError("env.terminal_on_life_loss needs a SAME_STEP vector env")
        self.lives: np.ndarray | None = None
        self.num_envs = num_envs
        self.device = device
        self._all_valid = torch.ones(num_envs, dtype=torch.bool, device=device)
        spec = self.env.spec
        #: the time limit of one episode: the config's override, else the registered one, else the sub-envs'
        #: own (a factory's or a ready vector env's TimeLimit; None = none)
        # gymnasium's EnvSpec has max_episode_steps; EnvPool's spec keeps it in its config
        registered = getattr(spec, "max_episode_steps", None) or getattr(getattr(spec, "config", None),
                                                                          "max_episode_steps", None)
        self.max_episode_steps = cfg.max_episode_steps or registered or sub_env_time_limit(vector_env)
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        self._vector = vector_env  # for VectorEnv.call (the action_masks() convention)
        self._mask: torch.Tensor | None = None
        self._steps = 0  # vector steps since this env was made, for messages
        try:
            #: where the masks come from: "info", "obs", "method", masks.PENDING_INFO (until the first reset), None
            self.mask_source = masks.resolve_source(cfg.action_mask, self.action_space, self.observation_space,
                                                    vector_env=vector_env)
            if self.mask_source == "obs":
                self.observation_space = masks.without_mask_key(self.observation_space)
            self.layout = obs_layout(self.observation_space)
            check_action_space(self.action_space)
        except masks.MaskError as exc:
            self.env.close()
            raise ConfigError(f"env {self._name()}: {exc}") from None
        except ConfigError:
            self.env.close()
            raise

    def _encode(self, obs: Any) -> Obs:
        try:
            return to_tensor(obs, self.layout, self.device)
        except ObservationError as exc:  # the env's own fault: exit 1 with one line, as for an env that raises
            raise TrainingError(f"env {self._name()}: {exc} (at vector step {self._steps})") from None

    def sub_envs(self) -> gym.vector.VectorEnv | None:
        """The gymnasium vector env whose sub-envs callbacks may change (``call``, ``get_attr``, ``set_attr``
        reach through their wrappers); None for a C++ pool."""
        return self.env.unwrapped if self._has_sub_envs else None

    def render(self) -> Any:
        """The sub-envs' frames (``render_mode = "rgb_array"``)."""
        return self.env.render()

    @property
    def render_fps(self) -> int | None:
        """The frame rate of the sub-envs' frames (their metadata's ``render_fps``)."""
        return (self.env.metadata or {}).get("render_fps")

    @property
    def valid(self) -> torch.Tensor:
        """``[N]`` bool: the sub-envs whose next step is a real transition (all but a NEXT_STEP env's
        pending dummy steps)."""
        return torch.as_tensor(~self._pending, device=self.device) if self.next_step else self._all_valid

    @property
    def action_mask(self) -> torch.Tensor | None:
        """``[N, A]`` bool on the device: the legal actions of the last returned observation (None: no masks)."""
        return self._mask

    def reset(self, seed: ResetSeed | None = None) -> Obs:
        """Reset every sub-env (sub-env i seeded ``seed + i``, or ``seed[i]`` for a list: shell/seeding.py).

        Raises:
            TrainingError: the env raised (one line naming it and the error), or a sub-env has no legal action.
            ConfigError: the action masks have the wrong shape or dtype, or the convention finds none.
        """
        try:
            obs, info = self.env.reset(seed=seed)
        except Exception as exc:  # as in step: an env that raises ends training with exit 1
            raise self._failure(exc, " on reset") from exc
        self._pending[:] = False
        if self.life_loss:
            self.lives = self._lives(info)
        self._read_mask(obs, info, at_reset=True)
        return self._encode(obs)

    def _read_mask(self, obs: Any, info: dict, at_reset: bool) -> None:
        """Read, check and keep the masks of the observation just returned (see the class docstring).

        Raises:
            ConfigError: at a reset, a mask of the wrong shape, dtype or values, no mask where one is asked, or
                "auto" that finds a near miss of a convention (``info["action_masks"]``: shell.envs.masks.near_miss).
            TrainingError: the same at a step; a sub-env with no legal action; the env's method raised.
        """
        try:
            # "auto": the first reset decides whether info carries masks, and refuses a near miss
            source = self.mask_source = masks.settle_source(self.mask_source, info, self.action_space,
                                                            self.observation_space, self._vector)
            if source is None:
                return
            raw = masks.read_mask(source, obs, info, self._vector, action_space=self.action_space)
            ignored = self._pending if self.next_step else None  # a dummy step ignores the action and its mask
            mask = masks.check_mask(raw, self.num_envs, self.action_space, ignored=ignored, row="sub-env {}".format,
                                    where=masks.moment(at_reset, self._steps))
        except masks.MaskError as exc:
            raise masks.env_error(exc, self._name(), at_reset, self._steps) from None
        except Exception as exc:  # the env's action_masks() raised
            raise TrainingError(f"env {self._name()} raised {type(exc).__name__} in {masks.METHOD}(): "
                                f"{first_line(exc)}") from exc
        self._mask = torch.as_tensor(mask, device=self.device)

    def _failure(self, exc: Exception, where: str = "") -> TrainingError:
        """The one line for what ``self.env`` raised: the env's own error, or that an async worker process
        ended (killed by the OS: SIGKILL, out of memory), which reaches here as a broken pipe."""
        if isinstance(exc, ShareError):  # a share's sub-env in a worker raised, or the worker ended: one line already
            return TrainingError(str(exc))
        processes = getattr(self.env.unwrapped, "processes", None)
        if processes and isinstance(exc, (EOFError, ConnectionError)):
            how = how_it_ended(processes)
            if how:
                return TrainingError(f"env {self._name()}: a worker process ended{how}{where}")
        return TrainingError(f"env {self._name()} raised {type(exc).__name__}{where}: {first_line(exc)}")

    def _name(self) -> str:
        return getattr(self.env.spec, "id", None) or self._id

    def _lives(self, info: dict) -> np.ndarray:
        if "lives" not in info:
            raise TrainingError(f"env.terminal_on_life_loss needs info['lives'] (ALE envs), which {self._name()} "
                                "does not give")
        return np.asarray(info["lives"]).copy()

    def step(self, action: torch.Tensor) -> StepResult:
        """Step every sub-env with the policy's ``action`` (``[N, A]`` float Box, ``[N]`` or ``[N, K]`` long).

        The action is cast here, at the env boundary, to the space's shape and dtype and
        into its bounds (:func:`shell.actions.to_env_action`).

        Raises:
            TrainingError: the env raised (one line naming it and the error).
        """
        env_action = to_env_action(action, self.action_space)
        try:
            obs, reward, terminated, truncated, info = self.env.step(env_action)
        except Exception as exc:  # an env that raises ends training with exit 1
            raise self._failure(exc) from exc
        self._steps += 1
        final_obs = done = ep_return = ep_length = start = None
        if self.next_step:
            # The step that ends an episode returns its final observation; the next one is a dummy.
            dummy, self._pending = self._pending, np.asarray(terminated | truncated, dtype=bool)
            reward = np.where(dummy, 0.0, reward)
            start = torch.as_tensor(dummy, device=self.device)
            if np.any(truncated & ~terminated):
                final_obs = self._encode(obs)
        # The final observation only matters for a truncation's bootstrap: skip it when nothing was truncated.
        elif "final_obs" in info and np.any(truncated & ~terminated):
            # gymnasium's format: an object array of the rows that ended, flagged by info["_final_obs"]
            final_obs = self._encode(stack_final_obs(obs, info["final_obs"], info["_final_obs"], self.layout))
        if "_episode" in info:
            done = torch.as_tensor(info["_episode"], device=self.device)
            ep_return = torch.as_tensor(np.asarray(info["episode"]["r"], dtype=np.float32), device=self.device)
            ep_length = torch.as_tensor(np.asarray(info["episode"]["l"], dtype=np.int64), device=self.device)
        if self.life_loss:
            # A lost life ends the episode for training only: the game goes on (no reset), and the
            # episode statistics above still count whole games.
            lives = self._lives(info)
            terminated = terminated | ((lives < self.lives) & ~(terminated | truncated))
            self.lives = lives
        self._read_mask(obs, info, at_reset=False)
        return StepResult(
            obs=self._encode(obs),
            reward=torch.as_tensor(np.asarray(reward, dtype=np.float32), device=self.device),
            terminated=torch.as_tensor(terminated, device=self.device),
            truncated=torch.as_tensor(truncated, device=self.device),
            final_obs=final_obs,
            episode_done=done,
            episode_return=ep_return,
            episode_length=ep_length,
            episode_start=start,
        )

    def close(self) -> None:
        """Close the envs; never raises, even when async workers have died (their pipes are broken)."""
        base = self.env.unwrapped
        processes = getattr(base, "processes", None)
        if processes and not all(p.is_alive() for p in processes):
            # a worker ended: gymnasium would wait on its pipe for the pending call, warn, raise and try again
            # from __del__; mark no call pending and terminate the rest instead
            base._state = AsyncState.DEFAULT
            try:
                self.env.close(terminate=True)
            except Exception:
                base.closed = True
            return
        try:
            self.env.close()
        except Exception:
            try:  # terminate what is left of the workers and close their pipes
                self.env.close(terminate=True)
            except Exception:
                pass


def check_config(cfg: EnvConfig) -> None:
    """The gymnasium backend takes every env key; what an env refuses is found when it is made."""


def eval_config(cfg: EnvConfig) -> EnvConfig:
    """Runs on gymnasium are evaluated on the same env."""
    return cfg


def make(cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
         wrappers: list | None = None, policy: PolicyConfig | None = None) -> GymVecEnv:
    """``num_envs`` copies of ``cfg.id`` through ``gymnasium.make_vec`` (SAME_STEP), each wrapped by
    :func:`sub_env_wrappers` and then ``wrappers``.

    Raises:
        ConfigError: see :func:`make_vector_env`, or an unsupported space.
    """
    return GymVecEnv(make_vector_env(cfg, num_envs, render_mode, wrappers), cfg, device, name=cfg.id)


def from_factory(factory: Callable[[], gym.Env], cfg: EnvConfig, num_envs: int, device: torch.device,
                 render_mode: str | None = None, wrappers: list | None = None,
                 policy: PolicyConfig | None = None) -> GymVecEnv:
    """``num_envs`` copies of a user's ``factory()`` (see :func:`vec_from_factory`)."""
    return GymVecEnv(vec_from_factory(factory, cfg, num_envs, render_mode, wrappers), cfg, device,
                     name=source_name(factory))


def from_vector_env(vector_env: gym.vector.VectorEnv, cfg: EnvConfig, device: torch.device) -> GymVecEnv:
    """A user's ready vector env, used as it is (SAME_STEP or NEXT_STEP)."""
    return GymVecEnv(vector_env, cfg, device)
