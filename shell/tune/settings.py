"""The command's input resolved into :class:`Settings` (config, space, seeds, evaluations, pruner, storage),
the JSON a worker reads on stdin; and a trial's config, the base config with the trial's parameters applied.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path
from typing import Any

import attrs

from shell.config import (
    TUNE_SECTION,
    Config,
    config_from_saved,
    load_config,
    read_toml,
    resolve_config_path,
    split_key,
)
from shell.errors import ConfigError
from shell.files import new_run_folder
from shell.tune.space import DEFAULT_SPACE, Param, _parse_param, parse_space

PRUNERS = ("median", "hyperband", "none")
DEFAULT_EVALS = 4
DEFAULT_SEEDS = (0, 1, 2)  # the seeds of a trial when neither --seeds nor [tune] seeds names them
DEFAULT_HEARTBEAT = 10


@attrs.frozen
class Settings:
    """Everything a worker needs, sent to it as JSON on stdin (nothing of it is written to disk)."""

    config: dict[str, Any]  # the base config (file, --set, --total-timesteps), as Config.to_dict()
    space: list[Param]
    seeds: list[int]
    evals: int
    trials: int
    storage: str
    study: str
    study_dir: str
    pruner: str
    heartbeat: int
    parent_pid: int

    def to_json(self) -> str:
        data = attrs.asdict(self, recurse=False)
        data["space"] = {p.key: p.to_spec() for p in self.space}
        return json.dumps(data)

    @classmethod
    def from_json(cls, text: str) -> Settings:
        data = json.loads(text)
        data["space"] = [_parse_param(key, spec) for key, spec in data["space"].items()]
        return cls(**data)

    def identity(self) -> dict[str, Any]:
        """What makes trials comparable: a rerun or another machine must use the same."""
        return {"config": self.config, "space": {p.key: p.to_spec() for p in self.space}, "seeds": self.seeds,
                "evals": self.evals}


def _read_tune_table(path: Path) -> dict[str, Any]:
    table = read_toml(path).get(TUNE_SECTION, {})
    if not isinstance(table, dict):
        raise ConfigError(f"{path}: [tune] must be a table")
    return table


def resolve_settings(config: str, trials: int, seeds: list[int] | None, total_timesteps: int | None,
                     overrides: list[str], study_dir: str | None, storage: str | None, study: str | None,
                     space: str | None, pruner: str | None, heartbeat: int) -> tuple[Settings, Config, list[str]]:
    """Check the command's input and resolve it into :class:`Settings` (the study dir is not created).

    Returns the settings, the base config and notes for the user (keys fixed by ``--set``).

    Raises:
        ConfigError: a bad config, space, seed list or [tune] table.
    """
    path = resolve_config_path(config)
    base = load_config(config, overrides, total_timesteps=total_timesteps)
    table = _read_tune_table(path)
    unknown = set(table) - {"space", "evals", "pruner", "seeds"}
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {sorted(unknown)} in [tune]; known: evals, pruner, seeds, space")
    if seeds is None:  # --seeds, else the config's [tune] seeds, else 0 1 2
        seeds = table.get("seeds", list(DEFAULT_SEEDS))
        if (not isinstance(seeds, list) or not seeds
                or not all(isinstance(x, int) and not isinstance(x, bool) and x >= 0 for x in seeds)):
            raise ConfigError(f"{path}: tune.seeds = {seeds!r}: needs a non-empty list of integers >= 0")
    evals = table.get("evals", DEFAULT_EVALS)
    if not isinstance(evals, int) or isinstance(evals, bool) or evals < 0:
        raise ConfigError(f"{path}: tune.evals = {evals!r}: needs an integer >= 0 (periodic evaluations per run)")
    pruner = pruner or table.get("pruner", "median")
    if pruner not in PRUNERS:
        raise ConfigError(f"{path}: tune.pruner = {pruner!r}: choose one of {list(PRUNERS)}")
    if space is not None:
        space_path = Path(space)
        if not space_path.is_file():
            raise ConfigError(f"--space {space}: no such file")
        space_table, source = _read_tune_table(space_path).get("space"), f"--space {space}"
        if space_table is None:
            raise ConfigError(f"--space {space}: no [tune.space] table in it")
    elif "space" in table:
        space_table, source = table["space"], str(path)
    else:
        space_table, source = DEFAULT_SPACE, "the default space"
    params = parse_space(space_table, source)
    fixed = [text.partition("=")[0].strip() for text in overrides]
    if total_timesteps is not None:
        fixed.append("run.total_timesteps")
    is_fixed = [any(p.key == f or p.key.startswith(f + ".") for f in fixed) for p in params]
    notes = [f"{p.key} is fixed by the command line, not tuned" for p, out in zip(params, is_fixed, strict=True) if out]
    params = [p for p, out in zip(params, is_fixed, strict=True) if not out]
    if not params:
        raise ConfigError(f"{source}: every key of the space is fixed by --set or --total-timesteps; nothing to tune")
    if not base.run.eval_episodes:
        raise ConfigError("tuning scores trials by their final evaluation; set run.eval_episodes >= 1")
    if len(set(seeds)) != len(seeds):
        raise ConfigError(f"--seeds {' '.join(map(str, seeds))}: a seed is listed twice")
    name = study or path.stem
    directory = Path(study_dir) if study_dir else _default_study_dir(path.stem)
    url = storage or f"sqlite:///{directory.resolve() / 'study.db'}"
    settings = Settings(config=base.to_dict(), space=params, seeds=list(seeds), evals=evals, trials=trials,
                        storage=url, study=name, study_dir=str(directory.resolve()), pruner=pruner,
                        heartbeat=heartbeat, parent_pid=os.getpid())
    return settings, base, notes


def _default_study_dir(stem: str) -> Path:
    return new_run_folder(f"tune_{stem}")


def trial_config(settings: Settings, params: dict[str, Any], seed: int | None = None) -> Config:
    """The base config with a trial's parameters (config values, not Optuna's stored ones) applied.

    With ``seed``, also the run's seed and the tuner's evaluation period: ``[tune] evals`` periodic
    evaluations, evenly spread over the run. Without, the config as ``best.toml`` writes it.

    Raises:
        ConfigError: the combination is invalid (e.g. a batch that num_minibatches does not divide).
    """
    data = copy.deepcopy(settings.config)
    for key, value in params.items():
        section, name, sub = split_key(key)
        if sub is None:
            data[section][name] = value
        else:
            data[section][name] = {**(data[section][name] or {}), sub: value}
    config = config_from_saved(data)
    if seed is None:
        return config
    num_updates = config.num_updates()
    every = -(-num_updates // (settings.evals + 1)) if settings.evals else 0
    return config_from_saved(data, seed=seed, eval_every=every)
