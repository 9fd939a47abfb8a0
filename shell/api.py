"""Train PPO from Python: the library's entry point (``main.py`` is a thin layer over it).

    import gymnasium as gym
    import shell

    result = shell.train("cartpole.toml", total_timesteps=50_000)
    result = shell.train(env=MyEnv, overrides={"env.num_envs": 8, "ppo.learning_rate": 1e-3},
                         callbacks=[shell.StopOnReward(475.0)])
    result = shell.train("cartpole", env=gym.make_vec("CartPole-v1", 16, vectorization_mode="sync"))
    action = result.policy.act(obs)                   # deterministic; numpy, as the env takes it
    result.run_dir, result.summary                    # summary.json's contents
    shell.evaluate(result.run_dir, env=MyEnv, episodes=10)  # ``ppo-core eval``; a factory run needs its env
    shell.play("ttt-run", env=my_game, seat="player_2")     # ``ppo-core play``: a turn-based game, moves on stdin

The env is an id (``str``), a factory (``Callable[[], gymnasium.Env]``, called once per sub-env)
or a ready ``gymnasium.vector.VectorEnv`` in SAME_STEP or NEXT_STEP autoreset mode (DESIGN.md,
"Env backends"); ``num_envs`` then comes from the vector env.

The API leaves the caller's process alone: it installs no signal handler, does not call
``torch.set_num_threads``, does not touch the global RNG (initial parameters are drawn under
``torch.random.fork_rng``; sampling and shuffling use the run's own generator), prints nothing to
stdout (progress goes to stderr; ``progress=False`` turns it off) and raises exceptions
(:class:`shell.errors.ConfigError` for bad input, :class:`shell.errors.TrainingError` for a
failure during training) instead of exiting.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

import attrs
import gymnasium as gym

from shell.callbacks import CallbackContext
from shell.checkpoint import latest_checkpoint
from shell.config import Config, apply_overrides, config_from_saved, load_config
from shell.distributed import Dist
from shell.envs import check_config as check_env_config
from shell.envs import factory_backend
from shell.errors import ConfigError, said
from shell.evaluation import eval_checkpoint
from shell.games.play import play as play_game
from shell.inference import Policy, load_policy, read_checkpoint, require_env
from shell.runner import Trainer, default_run_dir, prepare_run_dir
from shell.stop import StopRequest
from shell.tracking import check_loggers

__all__ = ["Callback", "EnvSource", "StopOnReward", "TrainResult", "evaluate", "play", "resume", "train"]

EnvSource = str | Callable[[], gym.Env] | gym.vector.VectorEnv
#: Called on rank 0 after every update with that update's metrics row (the same dict as a row of
#: metrics.csv; ``eval_return`` is ``""`` when no evaluation ran). Returning True ends training: the
#: run then checkpoints and evaluates as at its planned end, and the summary says ``stopped_early``.
#: A callback that takes a second argument gets a :class:`shell.callbacks.CallbackContext` (the envs,
#: for curricula) and runs on every rank; see shell/callbacks.py.
Callback = Callable[[dict[str, Any]], "bool | None"] | Callable[[dict[str, Any], CallbackContext], "bool | None"]


@attrs.frozen
class StopOnReward:
    """Stop training once the periodic deterministic evaluation reaches ``threshold``.

    Judged on ``eval_return``, the mean return of ``run.eval_episodes`` deterministic episodes run
    every ``run.eval_every`` updates, as Stable-Baselines3's StopTrainingOnRewardThreshold judges
    its EvalCallback. :func:`train` refuses it when ``run.eval_every`` is 0.

    Attributes:
        threshold: the mean evaluation return (in the env's reward units) that ends training.
    """

    threshold: float
    needs_eval = True

    def __call__(self, row: dict[str, Any]) -> bool:
        value = row.get("eval_return", "")
        return value != "" and float(value) >= self.threshold


@attrs.frozen
class TrainResult:
    """What :func:`train` and :func:`resume` return.

    Attributes:
        policy: the trained deterministic policy, as :func:`shell.inference.load_policy` returns it (the
            average policy of a run that keeps one, ``ppo.average_decay``): ``policy.act(obs)`` or ``policy(obs)``.
        run_dir: the run's folder (config.toml, metrics.csv, checkpoints/, summary.json).
        summary: the run's summary (summary.json), with ``stopped_early``.
        config: the resolved config.
    """

    policy: Policy
    run_dir: Path
    summary: dict[str, Any]
    config: Config


def _resolve_config(config: Config | str | os.PathLike | None, overrides: Mapping[str, Any] | Sequence[str],
                    explicit: dict[str, Any]) -> Config:
    if isinstance(config, Config):
        data = {name: {k: v for k, v in section.items() if v is not None}
                for name, section in config.to_dict().items()}
        return apply_overrides(data, overrides, **explicit)
    return load_config(None if config is None else str(config), overrides, **explicit)


def _source_name(source: Any) -> str:
    """A name for the env of a factory or a vector env without a registered id (run dir names, logs)."""
    name = getattr(source, "__name__", None) or type(source).__name__
    return re.sub(r"[^A-Za-z0-9_.-]+", "", name) or "env"


def _with_source(config: Config, env: EnvSource | None) -> tuple[Config, Any, str | None]:
    """The config adjusted to the env source, the source to build from (None: the config's id), and
    the source's kind as recorded in checkpoints (None, "factory" or "vector_env")."""
    if env is None:
        return config, None, None
    if isinstance(env, str):
        return attrs.evolve(config, env=attrs.evolve(config.env, id=env)), None, None
    if isinstance(env, gym.vector.VectorEnv):
        spec_id = env.spec.id if env.spec is not None else None
        env_cfg = attrs.evolve(config.env, id=spec_id or _source_name(env), num_envs=env.num_envs,
                               backend="gymnasium")
        return attrs.evolve(config, env=env_cfg), env, "vector_env"
    if callable(env):
        # a factory runs on the gymnasium backend, or for a multi-agent config on pettingzoo (a ParallelEnv factory)
        kept = factory_backend(config.env.backend)
        return attrs.evolve(config, env=attrs.evolve(config.env, id=_source_name(env), backend=kept)), env, "factory"
    raise ConfigError(f"env must be an id, a Callable[[], gymnasium.Env] or a gymnasium.vector.VectorEnv, "
                      f"not {type(env).__name__}")


def _eval_source(env: EnvSource | None, kind: str | None, eval_env: Callable[[], gym.Env] | None,
                 config: Config) -> Any:
    """Where evaluation envs come from: ``eval_env``, else the training factory, else the id of a
    ready vector env's spec (None: the config's id)."""
    if eval_env is not None:
        return eval_env
    if kind == "factory":
        return env
    if kind == "vector_env" and (env.spec is None or env.spec.id not in gym.registry):
        if config.run.eval_episodes or config.run.eval_every:
            raise ConfigError("a ready vector env without a registered spec cannot be re-created for evaluation; "
                              "pass eval_env=<Callable[[], gymnasium.Env]>, or set run.eval_episodes = 0")
    return None


def train(config: Config | str | os.PathLike | None = None, env: EnvSource | None = None, *,
          overrides: Mapping[str, Any] | Sequence[str] = (), seed: int | None = None,
          total_timesteps: int | None = None, device: str | None = None, run_dir: str | os.PathLike | None = None,
          callbacks: Sequence[Callback] = (), eval_env: Callable[[], gym.Env] | None = None,
          progress: bool = True, stop: StopRequest | None = None, dist: Dist | None = None,
          tracker_tags: Mapping[str, str] | None = None) -> TrainResult:
    """Train one PPO run and return its :class:`TrainResult`.

    Args:
        config: a :class:`shell.config.Config`, a TOML file or a shipped config's name (``"cartpole"``), or None
            for the defaults.
        env: an env id, a ``Callable[[], gymnasium.Env]`` (called once per sub-env; wrapped with
            the config's ``env.obs_keys`` / Atari chain; with ``env.backend = "pettingzoo"`` a
            ``Callable[[], pettingzoo.ParallelEnv]``, called once per copy), or a ready ``gymnasium.vector.VectorEnv``
            (SAME_STEP or NEXT_STEP autoreset; its ``num_envs`` wins; it is closed at the end, as
            the envs the run builds are). None: the config's ``env.id``.
        overrides: ``{"ppo.learning_rate": 1e-3, "env.kwargs.continuous": True}`` or CLI-style
            ``["ppo.learning_rate=1e-3"]``.
        seed: ``run.seed``; wins over the config and overrides.
        total_timesteps: ``run.total_timesteps``; wins over the config and overrides.
        device: ``run.device``; wins over the config and overrides.
        run_dir: the output folder (new or empty); default ``runs/<env>__s<seed>__<time>``.
        callbacks: called after every update with its metrics row (and a
            :class:`shell.callbacks.CallbackContext` if they take two arguments); one returning True
            stops training (see :data:`Callback`, :class:`StopOnReward`).
        eval_env: a factory for evaluation envs (default: the training factory, or the registered
            id of a ready vector env's spec).
        progress: show a tqdm progress bar on stderr.
        stop: a :class:`shell.stop.StopRequest` to end the run early with a checkpoint (the CLI
            requests it on SIGINT/SIGTERM); the summary then says ``interrupted``.
        dist: the torch.distributed group (``main.py`` under torchrun); default single-process.
        tracker_tags: tags for the run in its trackers (``run.loggers``): MLflow tags, W&B tags
            ``key:value``; ``parent_run_id`` makes the MLflow run a child of that run (``tune``).

    Runs made from a factory or a ready vector env cannot be rebuilt from their config: continue
    them from Python with the env again (:func:`resume`). Their policy loads without it
    (``load_policy(run_dir)``: checkpoints store the spaces).

    Raises:
        ConfigError: bad config, override, env or space (nothing is left behind: a run dir that
            was created for this run is removed).
        TrainingError: a non-finite loss or parameters, or an env that raised during training.
        Exception: whatever a callback raises, after the envs and logs are closed.
    """
    explicit = {"seed": seed, "total_timesteps": total_timesteps, "device": device}
    config = _resolve_config(config, overrides, explicit)
    config, source, kind = _with_source(config, env)
    check_env_config(config.env)  # the backend's own rules, before a run dir exists
    check_loggers(config.to_dict())  # names, extras, tracking URIs
    if any(getattr(cb, "needs_eval", False) for cb in callbacks) and not config.run.eval_every:
        raise ConfigError("StopOnReward judges the periodic eval_return; set run.eval_every (e.g. "
                          "overrides={'run.eval_every': 5})")
    eval_source = _eval_source(env, kind, eval_env, config)
    dist = dist or Dist()
    made = None  # the topmost folder that making the run dir creates (the run dir, or runs/ above it)
    if dist.is_main:
        path = Path(run_dir) if run_dir is not None else default_run_dir(config)
        made = _first_missing(path)
        path = prepare_run_dir(path, config)
    path = Path(dist.gather_objects(str(path) if dist.is_main else None)[0])
    try:
        trainer = Trainer(config, path, dist, stop, env_source=source, callbacks=callbacks,
                          eval_source=eval_source, progress=progress, source_kind=kind,
                          tracker_tags=dict(tracker_tags or {}))
    except ConfigError:
        # a start-up error (env id, space, device, missing extra) leaves no empty run dir behind
        if made is not None and path.is_dir() and not any(path.iterdir()):
            _remove_made(path, made)
        raise
    try:
        summary = trainer.train()
    except ConfigError:
        # a start-up error that the first reset finds (a mask convention that finds no mask) leaves no run dir
        # behind either, so that the same command, corrected, can run again
        if made is not None and not any((path / "checkpoints").glob("*.pt")):
            shutil.rmtree(path, ignore_errors=True)
            _remove_made(path, made)
        raise
    return TrainResult(trainer.policy(), path, summary, config)


def _first_missing(path: Path) -> Path | None:
    """The topmost of ``path`` and its parents that does not exist yet (what making ``path`` creates); None when
    ``path`` exists."""
    top = None
    for folder in (path, *path.parents):
        if folder.exists():
            break
        top = folder
    return top


def _remove_made(path: Path, made: Path) -> None:
    """Remove ``path`` and the empty folders above it up to ``made`` (what :func:`_first_missing` said making
    it would create): a refused run leaves neither its run dir nor an empty ``runs/``."""
    for folder in (path, *path.parents):
        try:
            folder.rmdir()
        except OSError:  # not empty (another run's), or already gone
            if folder.exists():
                return
        if folder == made:
            return


def _finished_summary(run_dir: Path, state: Mapping[str, Any], config: Config) -> dict[str, Any] | None:
    """The summary of a run that finished (its checkpoint holds every update of ``config``'s total and its
    summary.json, not an interrupted one's, was written); None where a resume has something to do."""
    if config.num_updates(state.get("world_size", 1)) > state["update"]:
        return None
    try:
        summary = json.loads((run_dir / "summary.json").read_text())
    except (OSError, ValueError):  # no summary yet (killed before it): the resume writes it
        return None
    if not isinstance(summary, dict) or summary.get("interrupted") or summary.get("updates") != state["update"]:
        return None
    return summary


def resume(run_dir: str | os.PathLike, total_timesteps: int | None = None, *, device: str | None = None,
           env: Callable[[], gym.Env] | gym.vector.VectorEnv | None = None,
           eval_env: Callable[[], gym.Env] | None = None, callbacks: Sequence[Callback] = (),
           progress: bool = True, stop: StopRequest | None = None, dist: Dist | None = None) -> TrainResult:
    """Continue the run in ``run_dir`` from its newest checkpoint.

    The config is the checkpoint's; ``total_timesteps`` may extend it and ``device`` may move it.
    Counters, learning-rate schedule, optimizer moments and the run's RNG streams continue
    exactly; the envs restart from a reset. metrics.csv is cut back to the checkpoint's update
    (shell/logs.py); temporary files of a checkpoint write that a kill interrupted are removed.
    A run trained on a factory or a ready vector env needs ``env`` again (the same kind).

    A run that finished (every update of its total trained, its summary written) has nothing to resume:
    ``resume`` returns its summary.json as it is, with one line on stderr saying so and how to train it
    further (a larger ``total_timesteps``); nothing in the run dir changes. The CLI exits 0 then, as for
    any resume that leaves the run complete (a retry loop after a preemption must not fail).

    Raises:
        ConfigError: no such run dir, no checkpoint in it, a corrupt one, fewer total steps than
            already taken, a factory run resumed without ``env``, or an ``env`` whose spaces differ
            from the checkpoint's.
    """
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ConfigError(f"{said('resume', run_dir)}: no such run dir")
    try:
        latest = latest_checkpoint(run_dir / "checkpoints")
    except ConfigError as error:  # e.g. killed before its first checkpoint
        raise ConfigError(f"{said('resume', run_dir)}: {error}: the run stopped before writing its first (every "
                          f"run.checkpoint_every updates); {said('train_again')} into a new or empty run dir"
                          ) from None
    path, state = read_checkpoint(latest)
    kind = state.get("env_source")
    require_env(run_dir, state, env, f"resume it from Python: shell.resume({str(run_dir)!r}, env={{env}})")
    config = config_from_saved(state["config"], total_timesteps=total_timesteps, device=device)
    # totals round up to whole updates: the same flags again (e.g. after a preemption) are fine
    if total_timesteps is not None and config.num_updates(state.get("world_size", 1)) < state["update"]:
        raise ConfigError(f"{said('resume', run_dir)}: the run already took {state['env_steps']} steps "
                          f"({state['update']} updates); {said('total_timesteps', total_timesteps)} is fewer")
    finished = _finished_summary(run_dir, state, config)
    if finished is not None:  # nothing to train: the run's own summary, and nothing on disk touched
        if progress:
            import sys

            print(f"{run_dir} already finished: it trained {state['env_steps']} env steps ({state['update']} "
                  f"updates) of run.total_timesteps = {config.run.total_timesteps}; to train it further, add "
                  f"{said('total_timesteps', 'N')} with N > {state['env_steps']}", file=sys.stderr)
        return TrainResult(load_policy(path, env=env), run_dir, finished, config)
    source = None
    if env is not None:
        config, source, kind = _with_source(config, env)
        config = attrs.evolve(config, env=attrs.evolve(config.env, id=state["config"]["env"]["id"]))
    check_env_config(config.env)
    check_loggers(config.to_dict())
    eval_source = _eval_source(env, kind, eval_env, config)
    if dist is None or dist.is_main:
        for stale in path.parent.glob(".*.tmp"):
            stale.unlink(missing_ok=True)
    trainer = Trainer(config, run_dir, dist, stop, env_source=source, callbacks=callbacks, eval_source=eval_source,
                      progress=progress, source_kind=kind)
    try:
        trainer.load_state_dict(state)  # the checkpoint's weights: shell.inference.load_weights
    except ConfigError:  # an env of other spaces, another world size
        trainer.env.close()
        raise
    if progress:
        import sys

        print(f"resuming {run_dir} from {path.name} (update {trainer.update}, env step {trainer.env_steps})",
              file=sys.stderr)
    summary = trainer.train()
    return TrainResult(trainer.policy(), run_dir, summary, config)


def evaluate(run_dir: str | os.PathLike, env: Callable[[], Any] | None = None, *, episodes: int = 20,
             video: bool = False, video_episodes: int = 1, device: str = "cpu",
             stop: StopRequest | None = None) -> dict[str, Any]:
    """Evaluate the deterministic policy of a run's newest checkpoint (or of a checkpoint file), as
    ``ppo-core eval`` does: ``episodes`` episodes with the run's evaluation seeds, cap and opponents (a
    turn-based game: against each, seat by seat, and the snapshots of its pool). ``eval.json`` is written beside
    the checkpoint; ``summary.json`` is left alone.

    Args:
        run_dir: a run dir or a checkpoint file.
        env: a factory of the run's env: a ``Callable[[], gymnasium.Env]``, or with ``env.backend = "pettingzoo"``
            of its PettingZoo env (a turn-based game's ``AECEnv`` or a ``ParallelEnv``), as :func:`train` took it.
            A run trained on a factory or a ready vector env needs it (its config cannot rebuild the env); None:
            the config's ``env.id``.
        episodes: evaluation episodes (a game's: per opponent, half in each seat).
        video: also record the first ``video_episodes`` episodes as mp4s in ``videos/`` beside the checkpoint
            (the ``video`` extra; ``env`` must then take ``render_mode="rgb_array"`` as a keyword).
        video_episodes: how many episodes to record, 1 to ``episodes``.
        device: the policy's device.
        stop: a :class:`shell.stop.StopRequest` that ends the evaluation early (raising ``Interrupted``).

    Returns:
        eval.json's contents: ``eval_return_mean`` and ``eval_return_std``, ``eval_episodes``, a game's
        ``eval_vs`` and ``elo``, ``videos`` (see the CLI reference's eval fields).

    Raises:
        ConfigError: a bad run dir or checkpoint; a run trained on a factory without ``env``, or an ``env`` that
            is not a factory; a missing video extra; ``video_episodes`` not in 1..``episodes``.
        TrainingError: the env gave a non-finite reward; a bot opponent played an illegal move.
    """
    return eval_checkpoint(run_dir, episodes, video, device, stop, video_episodes=video_episodes, env=env)


def play(run_dir: str | os.PathLike, env: Callable[[], Any] | None = None, *, seat: str | None = None,
         seed: int | None = None, device: str = "cpu", stdin: TextIO | None = None,
         out: Callable[[str], None] = print) -> dict[str, Any]:
    """Play one game of a turn-based game against a run's trained agent, as ``ppo-core play`` does: the board (or
    your seat's view) is passed to ``out`` before each of your moves, with the legal ones, and each line of
    ``stdin`` is a move (an illegal one is refused and asked again); the agent plays every other seat.

    Args:
        run_dir: a run dir or a checkpoint file of a turn-based game (``env.backend = "pettingzoo"`` or
            ``"openspiel"``).
        env: a factory of the run's game (a ``Callable[[], pettingzoo.AECEnv]``, as :func:`train` took it); a run
            trained on a factory needs it. None: the config's ``env.id``.
        seat: your seat, by name or index (default: the first).
        seed: the game's reset seed.
        device: the policy's device.
        stdin: where your moves come from, one per line (default ``sys.stdin``; ``io.StringIO("4\\n0\\n")``
            plays a script).
        out: where the boards, the agent's moves and the result's JSON line go (default ``print``).

    Returns:
        ``{"seat", "score", "result", "moves"}``: your seat, your score, ``"win"``, ``"draw"``, ``"loss"`` (or
        ``"unfinished"`` where ``stdin`` ended first) and how many moves both sides made (an int).

    Raises:
        ConfigError: a bad run dir or checkpoint; a run that is not of a turn-based game; a run trained on a
            factory without ``env``, or an ``env`` that does not make a turn-based game; an unknown seat.
    """
    return play_game(run_dir, seat, device, stdin=stdin, out=out, seed=seed, env=env)
