"""The search space: a ``[tune.space]`` table parsed and checked against the config's keys, and each
key's distribution (:class:`Param`), which asks an Optuna trial for a value and decodes what Optuna stores.
"""

from __future__ import annotations

import json
import types
import typing
from typing import Any

import attrs

from shell.config import SECTIONS, section_from_dict, split_key
from shell.errors import ConfigError

KINDS = ("log_uniform", "uniform", "int", "choice")
# Objective-defining keys: the seeds come from --seeds, evaluations from the tuner.
FIXED_KEYS = {"run.seed": "--seeds", "run.eval_every": "[tune] evals", "run.eval_episodes": "the config or --set",
              "run.eval_max_episode_steps": "the config or --set"}

DEFAULT_SPACE: dict[str, dict[str, Any]] = {
    "env.num_envs": {"choice": [16, 32]},
    "env.normalize_obs": {"choice": [False, True]},
    "ppo.num_steps": {"choice": [128, 256]},
    "ppo.num_minibatches": {"choice": [2, 4, 8]},
    "ppo.update_epochs": {"int": [4, 10]},
    "ppo.learning_rate": {"log_uniform": [5e-4, 3e-3]},
    "ppo.anneal_lr": {"choice": [True, False]},
    "ppo.gamma": {"choice": [0.98, 0.99, 0.995]},
    "ppo.gae_lambda": {"choice": [0.9, 0.95, 0.98]},
    "ppo.ent_coef": {"log_uniform": [1e-4, 2e-2]},
    "policy.hidden_sizes": {"choice": [[64, 64], [128, 128]]},
}
"""PPO's usual keys, around the values of the shipped classic-control configs. Batches of 2,048 to
8,192 transitions, at most 8 minibatches and 10 epochs keep a trial's update work at most twice the
shipped Acrobot config's (smaller batches made trials several times slower); every choice of
``num_minibatches`` divides every ``num_envs * num_steps``."""


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


@attrs.frozen
class Param:
    """One dimension of the search space: a config key and its distribution.

    ``kind`` is ``log_uniform`` or ``uniform`` (floats in ``[low, high]``), ``int`` (integers in
    ``[low, high]``, on a log scale when ``log``) or ``choice`` (one of ``choices``, any TOML values;
    Optuna sees lists and tables as their JSON text).
    """

    key: str
    kind: str
    low: float | None = None
    high: float | None = None
    log: bool = False
    choices: tuple[Any, ...] = ()

    @property
    def labels(self) -> list[Any] | None:
        """What Optuna stores for ``choices``: the values themselves when they are all of one plain
        type (bool, number or string), else their JSON text. None for the other kinds."""
        if self.kind != "choice":
            return None
        plain = (all(isinstance(c, bool) for c in self.choices) or all(_is_number(c) for c in self.choices)
                 or all(isinstance(c, str) for c in self.choices))
        return list(self.choices) if plain else [json.dumps(c) for c in self.choices]

    def suggest(self, trial: Any) -> Any:
        """Ask ``trial`` (an ``optuna.Trial``) for this key's value; returns the config value."""
        if self.kind == "log_uniform":
            return trial.suggest_float(self.key, self.low, self.high, log=True)
        if self.kind == "uniform":
            return trial.suggest_float(self.key, self.low, self.high)
        if self.kind == "int":
            return trial.suggest_int(self.key, int(self.low), int(self.high), log=self.log)
        return self.decode(trial.suggest_categorical(self.key, self.labels))

    def decode(self, stored: Any) -> Any:
        """The config value of a parameter value as Optuna stores it."""
        if self.kind == "choice":
            return self.choices[self.labels.index(stored)]
        return int(stored) if self.kind == "int" else float(stored)

    def to_spec(self) -> dict[str, Any]:
        """The TOML form, ``{kind = [low, high]}`` or ``{choice = [...]}``."""
        if self.kind == "choice":
            return {"choice": list(self.choices)}
        spec: dict[str, Any] = {self.kind: [self.low, self.high]}
        if self.log:
            spec["log"] = True
        return spec


def _flatten(table: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{ppo: {gamma: {uniform: [...]}}}`` and ``{"ppo.gamma": {uniform: [...]}}`` -> ``{"ppo.gamma": {...}}``.

    A table of tables is a level of the path; anything else (a distribution such as ``{uniform = [a, b]}``
    or a malformed value, refused later) is a leaf.
    """
    flat: dict[str, Any] = {}
    for name, value in table.items():
        path = f"{prefix}{name}"
        if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
            flat.update(_flatten(value, path + "."))
        else:
            flat[path] = value
    return flat


def _parse_param(key: str, spec: Any) -> Param:
    where = f"tune.space.{key}"
    example = "e.g. { log_uniform = [1e-4, 1e-2] }, { uniform = [0.9, 1.0] }, { int = [4, 16] }, { choice = [64, 128] }"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where} = {spec!r}: expected a distribution, {example}")
    kinds = [k for k in spec if k in KINDS]
    if len(kinds) != 1:
        raise ConfigError(f"{where} = {spec!r}: name exactly one distribution of {list(KINDS)}, {example}")
    (kind,) = kinds
    extra = set(spec) - {kind} - ({"log"} if kind == "int" else set())
    if extra:
        raise ConfigError(f"{where}: unknown field(s) {sorted(extra)} in {spec!r}"
                          + ("; only int takes 'log = true'" if "log" in extra else ""))
    value = spec[kind]
    if kind == "choice":
        if not isinstance(value, list) or not value:
            raise ConfigError(f"{where}: choice needs a non-empty list of values, got {value!r}")
        if len({json.dumps(v, sort_keys=True) for v in value}) != len(value):
            raise ConfigError(f"{where}: choice lists a value twice: {value!r}")
        return Param(key, kind, choices=tuple(value))
    if not (isinstance(value, list) and len(value) == 2 and all(_is_number(v) for v in value)):
        raise ConfigError(f"{where}: {kind} needs [low, high] (two numbers), got {value!r}")
    low, high = value
    if not low < high:
        raise ConfigError(f"{where}: {kind} needs low < high, got {value!r}")
    log = spec.get("log", False)
    if not isinstance(log, bool):
        raise ConfigError(f"{where}: log must be true or false, got {log!r}")
    if kind == "int" and not all(isinstance(v, int) for v in value):
        raise ConfigError(f"{where}: int needs integer bounds, got {value!r}")
    if (kind == "log_uniform" or log) and low <= 0:
        raise ConfigError(f"{where}: a log scale needs low > 0, got {value!r}")
    return Param(key, kind, low, high, log)


def _check_param(param: Param) -> None:
    """Refuse a key that does not exist or defines the objective, a distribution that does not fit the
    key's type, and bounds or choices that the key's own validation refuses."""
    where = f"tune.space.{param.key}"
    try:
        section, key, sub = split_key(param.key)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    if f"{section}.{key}" in FIXED_KEYS:
        raise ConfigError(f"{where}: {section}.{key} is not tuned; it comes from {FIXED_KEYS[f'{section}.{key}']}")
    hint = typing.get_type_hints(SECTIONS[section])[key]
    if typing.get_origin(hint) in (typing.Union, types.UnionType):  # X | None
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    base = typing.Any if sub else (typing.get_origin(hint) or hint)  # a name in env.kwargs: any TOML value
    allowed = {float: ("log_uniform", "uniform", "int", "choice"), int: ("int", "choice"),
               typing.Any: KINDS}.get(base, ("choice",))
    if param.kind not in allowed:
        kind = str(getattr(base, "__name__", base))
        raise ConfigError(f"{where}: {section}.{key} is {'an' if kind[0] in 'aeiou' else 'a'} {kind}; "
                          f"use {' or '.join(allowed)}")
    for value in param.choices or (param.low, param.high):
        try:
            section_from_dict(section, {key: {sub: value} if sub else value})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None


def decode_params(space: dict[str, Any], params: dict[str, Any]) -> dict[str, Any]:
    """The config values of a trial's parameters as Optuna stores them (``trial.params``: a choice of lists or
    tables as its JSON text), given the space as a study saves it (``{key: Param.to_spec()}``). Not checked
    against the config's schema, so an old study still reads; a key the space lacks is kept as Optuna has it."""
    parsed = {key: _parse_param(key, spec) for key, spec in space.items()}
    return {key: parsed[key].decode(value) if key in parsed else value for key, value in params.items()}


def parse_space(table: Any, source: str) -> list[Param]:
    """The search space of a ``[tune.space]`` table: ``section.key = { kind = ... }`` per key.

    Raises:
        ConfigError: (one line naming ``source`` and the key) an empty or malformed table, an unknown
            distribution or key, a distribution that does not fit the key, or bounds the key refuses.
    """
    if not isinstance(table, dict) or not table:
        raise ConfigError(f"{source}: [tune.space] must be a non-empty table of section.key = {{ distribution }}")
    try:
        params = [_parse_param(key, spec) for key, spec in _flatten(table).items()]
        for param in params:
            _check_param(param)
    except ConfigError as exc:
        raise ConfigError(f"{source}: {exc}") from None
    return params
