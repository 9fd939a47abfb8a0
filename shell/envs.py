"""Vector environments behind one small interface, with the autoreset details hidden.

Everything returned is a tensor on the configured device; numpy appears only
at the gymnasium boundary (one conversion per step).
"""

from __future__ import annotations

import importlib
import os
import signal
import warnings
from collections.abc import Callable
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from gymnasium import spaces
from gymnasium.vector import AutoresetMode

from shell.actions import box_action_layout, to_env_action
from shell.config import EnvConfig
from shell.envpool_loader import envpool_registration
from shell.errors import ConfigError, TrainingError
from shell.installation import install_hint
from shell.observations import Obs, obs_layout, stack_final_obs, to_tensor

EXTRAS = {"box2d": "box2d", "mujoco": "mujoco", "moviepy": "video", "ale_py": "atari", "minigrid": "minigrid",
          "cv2": "atari", "opencv": "atari"}


class StepResult(NamedTuple):
    """One vector step, all tensors on the device.

    Attributes:
        obs: the observation to act on next (the reset observation for sub-envs whose
            episode just ended): ``[N, S]`` float32 for flat spaces, ``[N, ...]`` images in
            their own dtype, or a dict of those (shell/observations.py).
        reward: ``[N]`` float32.
        terminated: ``[N]`` bool (for training: with ``env.terminal_on_life_loss`` also a lost life).
        truncated: ``[N]`` bool (time limit, not termination).
        final_obs: like ``obs``, the true last observation where an episode
            ended this step and ``obs`` elsewhere; ``None`` when the env knows that
            no episode was truncated without terminating (the gymnasium backend),
            as then no bootstrap needs it.
        episode_done: ``[N]`` bool, an episode ended this step; ``None`` (and the two
            fields below too) when the env knows that none did (the gymnasium backend).
        episode_return: ``[N]`` float32 raw return of that episode (where ``episode_done``).
        episode_length: ``[N]`` long, its length (where ``episode_done``).
        episode_start: ``[N]`` bool, ``obs`` is the first observation of an episode; None means
            "where this step ended one" (``terminated | truncated``, SAME_STEP autoreset). A
            NEXT_STEP source sets it on the dummy step that resets (see :class:`GymVecEnv`).
    """

    obs: Obs
    reward: torch.Tensor
    terminated: torch.Tensor
    truncated: torch.Tensor
    final_obs: Obs | None
    episode_done: torch.Tensor | None
    episode_return: torch.Tensor | None
    episode_length: torch.Tensor | None
    episode_start: torch.Tensor | None = None


def check_action_space(space: gym.Space) -> None:
    """Raise ConfigError (one line naming the space) for an action space the policies cannot serve.

    Served: Box of any shape (flattened; float or integer dtype, finite bounds, fixed
    ``low == high`` components held at their value, see :func:`shell.actions.box_action_layout`),
    Discrete(n >= 2, start) and MultiDiscrete(1-D nvec with an entry >= 2, start), of any
    integer dtype.
    """
    if isinstance(space, spaces.Box):
        box_action_layout(space)
        return
    if isinstance(space, spaces.Discrete):
        if space.n < 2:
            raise ConfigError(f"unsupported action space {space}: a Discrete action space needs n >= 2")
        return
    if isinstance(space, spaces.MultiDiscrete):
        if space.nvec.ndim != 1 or not np.any(space.nvec >= 2):
            raise ConfigError(f"unsupported action space {space}: MultiDiscrete needs a 1-D nvec with an entry >= 2")
        return
    raise ConfigError(
        f"unsupported action space {space}; supported: Box with finite bounds, Discrete, MultiDiscrete"
    )


def _signal_free_worker(*args: Any) -> None:
    """gymnasium's AsyncVectorEnv worker, with SIGINT and SIGTERM ignored.

    Ctrl-C signals the whole process group. A worker that took it would die with a
    KeyboardInterrupt, print its traceback and break the next ``step`` before the main
    process could save a checkpoint. The main process alone answers signals and then
    closes its workers; a worker whose parent died ends on the closed pipe.
    """
    from gymnasium.vector.async_vector_env import _async_worker

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    _async_worker(*args)


# Packages whose import registers env ids, and the extra that installs each.
ENV_PACKAGES = {"ALE/": ("ale_py", "atari"), "MiniGrid-": ("minigrid", "minigrid"), "BabyAI-": ("minigrid", "minigrid")}


def _import_env_package(env_id: str) -> None:
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
        msg = str(exc).splitlines()[0] if str(exc) else ""
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
            msg = str(exc).splitlines()[0] if str(exc) else ""
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


def _make_vec(cfg: EnvConfig, num_envs: int, render_mode: str | None = None,
              wrappers: list | None = None) -> gym.vector.VectorEnv:
    _import_env_package(cfg.id)
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
    vector_kwargs: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP}
    if cfg.vectorization_mode == "async":
        vector_kwargs["worker"] = _signal_free_worker
    try:
        return gym.make_vec(
            cfg.id,
            num_envs=num_envs,
            vectorization_mode=cfg.vectorization_mode,
            vector_kwargs=vector_kwargs,
            **kwargs,
        )
    except ConfigError:  # a user wrapper that could not be built: already one line naming it
        raise
    except gym.error.DependencyNotInstalled as exc:
        extra = next((e for k, e in EXTRAS.items() if k in str(exc).lower()), None)
        hint = install_hint(extra) if extra else "install the package it names"
        raise ConfigError(f"env {cfg.id!r} needs a missing optional dependency; run: {hint}") from None
    except Exception as exc:  # an env that cannot be built from this config: bad id, kwarg, or an assert inside it
        msg = str(exc).splitlines()[0] if str(exc) else ""
        if not msg or isinstance(exc, AssertionError):
            msg = type(exc).__name__ + (f": {msg}" if msg else "")
        context = [f"env.kwargs = {dict(cfg.kwargs)!r}"] if cfg.kwargs else []
        if cfg.obs_keys is not None:
            context.append(f"env.obs_keys = {list(cfg.obs_keys)!r}")
        where = f" ({'; '.join(context)})" if context and not isinstance(exc, gym.error.Error) else ""
        raise ConfigError(f"cannot make env {cfg.id!r}: {msg}{where}") from None


# env.kwargs that ale-py's AtariVectorEnv takes as gymnasium's AtariEnv does (the rest have no counterpart there).
ALE_VECTOR_KWARGS = ("repeat_action_probability", "full_action_space", "max_num_frames_per_episode")


def ale_vector_options(cfg: EnvConfig) -> tuple[str, dict[str, Any]]:
    """The game and the ``AtariVectorEnv`` options of ``cfg.id``: its registered
    ``repeat_action_probability``, ``full_action_space`` and ``max_num_frames_per_episode``, each
    overridden by ``env.kwargs``.

    Raises:
        ConfigError: ``cfg.id`` is not an ALE id, or ``env.kwargs`` has a key the vector env does
            not take (``frameskip`` may only be 1, the gymnasium chain's own setting).
    """
    _import_env_package(cfg.id)
    try:
        spec = gym.spec(cfg.id)
    except gym.error.Error as exc:
        raise ConfigError(f"cannot make env {cfg.id!r}: {str(exc).splitlines()[0]}") from None
    if "game" not in spec.kwargs:
        raise ConfigError(f"env.backend = 'ale' needs an ALE id such as 'ALE/Pong-v5', not {cfg.id!r}")
    unknown = sorted(set(cfg.kwargs) - set(ALE_VECTOR_KWARGS) - {"frameskip"})
    if unknown or cfg.kwargs.get("frameskip", 1) != 1:
        what = f"env.kwargs key {unknown[0]!r}" if unknown else f"env.kwargs.frameskip = {cfg.kwargs['frameskip']!r}"
        raise ConfigError(f"{what} is not supported by env.backend = 'ale' (it takes frameskip = 1 and "
                          f"{', '.join(ALE_VECTOR_KWARGS)}); use env.backend = 'gymnasium'")
    options = {key: spec.kwargs[key] for key in ALE_VECTOR_KWARGS if key in spec.kwargs}
    options.update({key: cfg.kwargs[key] for key in ALE_VECTOR_KWARGS if key in cfg.kwargs})
    return spec.kwargs["game"], options


def _backend_error(cfg: EnvConfig, exc: Exception) -> ConfigError:
    """One line for a C++ backend's vector env that could not be built from ``cfg``."""
    msg = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, TypeError) and "incompatible constructor arguments" in msg:  # pybind11's, many lines long
        msg = "a value in env.kwargs has a type the C++ env does not accept"
    return ConfigError(f"cannot make env {cfg.id!r} with env.backend = {cfg.backend!r}: {msg} "
                       f"(env.kwargs = {dict(cfg.kwargs)!r})")


def _make_ale_vec(cfg: EnvConfig, num_envs: int) -> gym.vector.VectorEnv:
    """ale-py's C++ ``AtariVectorEnv`` doing the work of :func:`atari_wrappers` on ``cfg.id``'s game.

    The same chain as ``gymnasium.make(cfg.id, frameskip=1)`` under ``AtariPreprocessing`` and
    ``FrameStackObservation``: the id's registered sticky actions, action set and frame limit
    (overridden by ``env.kwargs``), up to 30 no-op starts, frame skip 4 with max-pooling of the last
    two frames, 84x84 greyscale, ``env.frame_stack`` frames, no fire reset, the game score as
    reward (``env.sign_reward`` clips it for training only) and whole games as episodes (a lost
    life is handled by :class:`GymVecEnv`). Stepping runs in C++ threads, one per core at most.
    One difference: the first stack of an episode is padded with zero frames where
    ``FrameStackObservation`` repeats the first frame. SAME_STEP autoreset, with the final
    observations in ``info["final_obs"]``.

    Raises:
        ConfigError: see :func:`ale_vector_options`; or the vector env could not be built.
    """
    game, options = ale_vector_options(cfg)
    from ale_py.vector_env import AtariVectorEnv

    try:
        return AtariVectorEnv(game, num_envs, num_threads=min(num_envs, len(os.sched_getaffinity(0))),
                              img_height=84, img_width=84, grayscale=True, stack_num=cfg.frame_stack, frameskip=4,
                              maxpool=True, noop_max=30, episodic_life=False, reward_clipping=False,
                              use_fire_reset=False, autoreset_mode=AutoresetMode.SAME_STEP, **options)
    except Exception as exc:
        raise _backend_error(cfg, exc) from None


# env.kwargs that configure EnvPool's pool rather than the env (dropped for the gymnasium evaluation env;
# "seed" is refused for training now, but configs saved before that may carry it)
ENVPOOL_OPTIONS = ("num_threads", "batch_size", "thread_affinity_offset", "seed")


def _check_envpool_options(kwargs: dict[str, Any], num_envs: int) -> None:
    """Refuse pool options that EnvPool would abort the process on, or that this loop cannot run.

    Raises:
        ConfigError: ``seed`` given (it comes from ``run.seed``), ``num_threads`` or
            ``thread_affinity_offset`` not an int (>= 0, >= -1), or ``batch_size`` other than 0 or
            ``num_envs`` (EnvPool's async mode returns a subset of the sub-envs per step).
    """
    if "seed" in kwargs:
        raise ConfigError("env.kwargs.seed: the envpool backend seeds its pool from run.seed (sub-env i gets "
                          "run.seed + i, as on the other backends); drop it and use --seed")
    for key, low in (("num_threads", 0), ("thread_affinity_offset", -1)):
        value = kwargs.get(key, low)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise ConfigError(f"env.kwargs.{key} = {value!r}: EnvPool needs an int >= {low}")
    batch = kwargs.get("batch_size", 0)
    if isinstance(batch, bool) or not isinstance(batch, int) or batch not in (0, num_envs):
        raise ConfigError(f"env.kwargs.batch_size = {batch!r}: every sub-env steps at every rollout step, so it "
                          f"must be 0 or env.num_envs ({num_envs}); EnvPool's async mode is not supported")


def _make_envpool_vec(cfg: EnvConfig, num_envs: int, seed: int | None = None) -> gym.vector.VectorEnv:
    """EnvPool's C++ vector env of ``cfg.id`` (``envpool.make_gymnasium``), stepping in a thread pool.

    EnvPool autoresets NEXT_STEP: :class:`GymVecEnv` keeps its dummy steps out of the rollout.
    ``env.kwargs`` go to ``make_gymnasium`` as they are, and ``env.max_episode_steps`` as its
    ``max_episode_steps``. EnvPool seeds its sub-envs when it builds the pool (sub-env i gets
    ``seed + i``; EnvPool's own default seed where ``seed`` is None) and ignores ``reset(seed=...)``,
    so :meth:`GymVecEnv.reset` rebuilds the pool with the seed it is given (0.5 ms for CartPole,
    30 ms for HalfCheetah). The pool runs one thread unless ``env.kwargs.num_threads`` says otherwise
    (EnvPool's default is one per core): CartPole-v1 with 16 envs trained about twice as fast that
    way on 2 cores, where the training process's own thread needs one of them.

    Raises:
        ConfigError: no envpool (naming the pip command), an id EnvPool does not have, pool
            options it would abort on (:func:`_check_envpool_options`), or kwargs it refuses (one line).
    """
    try:
        envpool = envpool_registration(cfg.id)  # only the classic-control family for its ids (shell/envpool_loader.py)
    except ImportError:
        raise ConfigError("env.backend = 'envpool' needs the envpool package; run: "
                          f"{install_hint('envpool')}") from None
    if cfg.id not in envpool.list_all_envs():
        raise ConfigError(f"env.backend = 'envpool' has no env {cfg.id!r} (EnvPool names its Atari games without "
                          "'ALE/', e.g. 'Pong-v5'); for other ids use env.backend = 'gymnasium'")
    _check_envpool_options(cfg.kwargs, num_envs)
    kwargs: dict[str, Any] = {"num_threads": 1, **cfg.kwargs}
    if cfg.max_episode_steps is not None:
        kwargs["max_episode_steps"] = cfg.max_episode_steps
    if seed is not None:
        kwargs["seed"] = seed
    try:
        with warnings.catch_warnings():  # EnvPool's float64 space bounds, cast to float32 by gymnasium's Box
            warnings.filterwarnings("ignore", message=r".*Box (low|high)'s precision lowered", category=UserWarning)
            env = envpool.make_gymnasium(cfg.id, num_envs=num_envs, **kwargs)
            env.single_observation_space, env.single_action_space  # noqa: B018 - built (and cached) on first use
            return env
    except Exception as exc:
        raise _backend_error(cfg, exc) from None


# the backends whose vector env is a C++ one, built from the config and run by GymVecEnv
CPP_BACKENDS = {"ale": _make_ale_vec, "envpool": _make_envpool_vec}


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
            raise ConfigError(f"the env factory {getattr(factory, '__name__', factory)!r} returned "
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
        raise ConfigError(f"the env factory {getattr(factory, '__name__', factory)!r} raised "
                          f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}") from None
    if cfg.vectorization_mode == "async":
        return gym.vector.AsyncVectorEnv([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP,
                                         worker=_signal_free_worker)
    return gym.vector.SyncVectorEnv([make] * num_envs, autoreset_mode=AutoresetMode.SAME_STEP)


class GymVecEnv:
    """A gymnasium vector env that speaks tensors: built from the config's id, from a factory, or given ready.

    Sub-env i is seeded with ``seed + i`` at the first reset.

    SAME_STEP autoreset (what this library builds): the final observation of an ended episode
    comes from ``info["final_obs"]`` (stacked under ``info["_final_obs"]``), so no dummy
    transition enters a rollout.

    NEXT_STEP autoreset (gymnasium's default; a user's ready vector env; EnvPool): a sub-env whose
    episode ended resets on its next step, which ignores the action and returns the first
    observation of the new episode with reward 0. That step is a *dummy*. Here, the step that
    ends an episode returns its final observation as ``obs`` (and as ``final_obs`` for a
    truncation's bootstrap), and :attr:`pending_dummy` flags the sub-envs whose next step is a
    dummy, so that the runner keeps those steps out of GAE, the losses, the normalisers and the
    episode statistics (gymnasium's RecordEpisodeStatistics skips them itself). The dummy step's
    ``episode_start`` marks the reset observation it returns.

    Args:
        cfg: the env config (its id is used only when ``vector_env`` is None).
        num_envs: sub-envs to build (ignored for a given ``vector_env``).
        vector_env: a ready ``gymnasium.vector.VectorEnv`` (SAME_STEP or NEXT_STEP).
        factory: a ``Callable[[], gymnasium.Env]`` to build the sub-envs from.

    Raises:
        ConfigError: the env cannot be built, or has an unsupported space or autoreset mode.
    """

    def __init__(self, cfg: EnvConfig, num_envs: int, device: torch.device, render_mode: str | None = None,
                 wrappers: list | None = None, vector_env: gym.vector.VectorEnv | None = None,
                 factory: Callable[[], gym.Env] | None = None):
        self._id = cfg.id if vector_env is None and factory is None else None  # for messages
        self._reseed: Callable[[int], gym.vector.VectorEnv] | None = None
        if vector_env is not None:
            mode = autoreset_mode(vector_env)
            num_envs = vector_env.num_envs
        elif factory is not None:
            vector_env, mode = vec_from_factory(factory, cfg, num_envs, render_mode, wrappers), AutoresetMode.SAME_STEP
        elif cfg.backend in CPP_BACKENDS:  # ale-py's runs SAME_STEP, EnvPool's NEXT_STEP: their metadata says
            vector_env = CPP_BACKENDS[cfg.backend](cfg, num_envs)
            mode = autoreset_mode(vector_env)
            if cfg.backend == "envpool":  # seeded when built, reset(seed=...) ignored: reset rebuilds it
                self._reseed = lambda seed: _make_envpool_vec(cfg, num_envs, seed)
        else:
            vector_env, mode = _make_vec(cfg, num_envs, render_mode, wrappers), AutoresetMode.SAME_STEP
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
        spec = self.env.spec
        #: the time limit of one episode: the config's override, else the registered one (None = none)
        # gymnasium's EnvSpec has max_episode_steps; EnvPool's spec keeps it in its config
        registered = getattr(spec, "max_episode_steps", None) or getattr(getattr(spec, "config", None),
                                                                          "max_episode_steps", None)
        self.max_episode_steps = cfg.max_episode_steps or registered
        self.observation_space = self.env.single_observation_space
        self.action_space = self.env.single_action_space
        try:
            self.layout = obs_layout(self.observation_space, cfg.obs_keys)
            check_action_space(self.action_space)
        except ConfigError:
            self.env.close()
            raise

    def _encode(self, obs: Any) -> Obs:
        return to_tensor(obs, self.layout, self.device)

    @property
    def pending_dummy(self) -> torch.Tensor | None:
        """``[N]`` bool: the sub-envs whose next step is a NEXT_STEP dummy; None for a SAME_STEP env."""
        return torch.as_tensor(self._pending, device=self.device) if self.next_step else None

    def reset(self, seed: int | None = None) -> Obs:
        """Reset every sub-env (sub-env i seeded ``seed + i``).

        Raises:
            TrainingError: the env raised (one line naming it and the error).
        """
        if seed is not None and self._reseed is not None:  # EnvPool: a new pool seeded seed + i
            self.env.close()
            self.env = gym.wrappers.vector.RecordEpisodeStatistics(self._reseed(seed))
            seed = None
        try:
            obs, info = self.env.reset(seed=seed)
        except Exception as exc:  # as in step: an env that raises ends training with exit 1
            raise TrainingError(f"env {self._name()} raised {type(exc).__name__} on reset: {exc}") from exc
        self._pending[:] = False
        if self.life_loss:
            self.lives = self._lives(info)
        return self._encode(obs)

    def _name(self) -> str:
        return getattr(self.env.spec, "id", None) or self._id or "env"

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
            raise TrainingError(f"env {self._name()} raised {type(exc).__name__}: {exc}") from exc
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
            final = info["final_obs"]
            if "_final_obs" in info:  # gymnasium's vector envs: an object array, with a mask
                final_obs = self._encode(stack_final_obs(obs, final, info["_final_obs"], self.layout))
            else:  # ale-py's AtariVectorEnv: one batched array, read on the rows that ended
                final_obs = self._encode(np.where((terminated | truncated).reshape(-1, *[1] * (obs.ndim - 1)),
                                                  final, obs))
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
        try:
            self.env.close()
        except Exception:
            try:  # terminate what is left of the workers and close their pipes
                self.env.close(terminate=True)
            except Exception:
                pass


def make_env(cfg: EnvConfig, device: torch.device, num_envs: int | None = None, render_mode: str | None = None,
             wrappers: list | None = None, source: Any = None):
    """Build the configured vector env (``num_envs`` defaults to ``cfg.num_envs``).

    ``backend = "gymnasium"``, ``"ale"`` (ale-py's C++ Atari vector env, :func:`_make_ale_vec`) or
    ``"envpool"`` (:func:`_make_envpool_vec`, NEXT_STEP) gives a :class:`GymVecEnv`; ``backend =
    "torch"`` a batched tensor env from :mod:`shell.torch_envs` (rendering and wrappers need the
    gymnasium backend).
    ``wrappers`` (callables env -> env) wrap each sub-env, as in ``gym.make_vec``, outside the
    config's own (:func:`sub_env_wrappers`).
    ``source`` replaces the config's id: a ``Callable[[], gymnasium.Env]`` factory, or a ready
    ``gymnasium.vector.VectorEnv`` (used as it is: ``num_envs``, ``render_mode`` and ``wrappers``
    do not apply to it).

    Raises:
        ConfigError: unknown env id, missing optional extra, unsupported space, an id
            with no torch implementation, rendering or wrappers asked of a backend other than
            gymnasium, or an ``env.wrappers`` entry that cannot be imported or built.
    """
    num_envs = num_envs or cfg.num_envs
    if isinstance(source, gym.vector.VectorEnv):
        return GymVecEnv(cfg, num_envs, device, vector_env=source)
    if source is not None:
        if not callable(source):
            raise ConfigError(f"env must be an id, a Callable[[], gymnasium.Env] or a gymnasium.vector.VectorEnv, "
                              f"not {type(source).__name__}")
        return GymVecEnv(cfg, num_envs, device, render_mode, wrappers, factory=source)
    if cfg.backend != "gymnasium" and (render_mode is not None or wrappers):
        raise ConfigError("rendering and wrappers need env.backend = 'gymnasium'")
    if cfg.backend == "torch":
        from shell.torch_envs import TORCH_ENVS

        if cfg.id not in TORCH_ENVS:
            raise ConfigError(f"env.backend = 'torch' has no env {cfg.id!r}; torch envs: {sorted(TORCH_ENVS)}")
        return TORCH_ENVS[cfg.id](num_envs, device, cfg.max_episode_steps)
    return GymVecEnv(cfg, num_envs, device, render_mode, wrappers)
