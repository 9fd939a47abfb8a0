"""Configs in and out of TOML: config files, ``--set`` overrides, did-you-mean hints and the dump.

The schema (:mod:`shell.config.schema`) says which sections and keys exist and what each allows; this module
finds a config file (as given, else among the shipped configs), parses it, merges overrides and explicit flags,
checks each value's type against the schema's annotations and builds the frozen :class:`Config`, every error
one line naming the key, the value and what is allowed. :func:`dump_toml` writes a config back as TOML.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs
import tomllib

from shell.config.schema import SECTIONS, TUNE_SECTION, Config
from shell.errors import ConfigError, said
from shell.installation import CONFIG_DIR


# ----------------------------------------------------------------------------- dicts into the schema's classes
def _check_type(key: str, value: Any, annotation: Any) -> Any:
    """Return ``value`` coerced to ``annotation`` or raise a one-line ConfigError."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _check_type(key, value, args[0])
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key} = {value!r} has the wrong type; expected a table, e.g. {{ name = 1 }}")
        return dict(value)
    if origin is list:
        (item,) = typing.get_args(annotation)
        if not isinstance(value, list):
            what = "an array of tables, e.g. [[env.wrappers]]" if typing.get_origin(item) is dict \
                else f"a list of {item.__name__}"
            raise ConfigError(f"{key} = {value!r} has the wrong type; expected {what}")
        return [_check_type(f"{key}[{i}]", v, item) for i, v in enumerate(value)]
    ok = {
        bool: isinstance(value, bool),
        int: (isinstance(value, int) and not isinstance(value, bool))
        or (isinstance(value, float) and value.is_integer()),
        float: isinstance(value, int | float) and not isinstance(value, bool),
        str: isinstance(value, str),
    }[annotation]
    if not ok:
        raise ConfigError(f"{key} = {value!r} has the wrong type; expected {annotation.__name__}")
    return annotation(value)


def _closest(word: str, candidates: list[str], width: int = 90) -> str:
    """``"; did you mean 'x'?"``, else the known names, the first that fit in ``width`` characters (a message
    stays one short line)."""
    match = difflib.get_close_matches(word, candidates, n=1, cutoff=0.5)
    if match:
        return f"; did you mean {match[0]!r}?"
    known = sorted(candidates)
    if len(str(known)) <= width:
        return f"; known: {known}"
    shown: list[str] = []
    for name in known:
        if len(", ".join([*shown, name])) > width:
            break
        shown.append(name)
    return f"; known: {', '.join(shown)}, ... ({len(known) - len(shown)} more)"


def section_from_dict(name: str, values: dict[str, Any]) -> Any:
    """Build and validate one section (``env``, ``policy``, ``ppo`` or ``run``) from ``{key: value}``,
    the other keys at their defaults; checks of the whole config (batch divisibility) are not made.

    Raises:
        ConfigError: unknown section or key (with the closest known one), wrong
            type, or out-of-range value.
    """
    if name not in SECTIONS:
        raise ConfigError(f"unknown config section [{name}]{_closest(name, list(SECTIONS))}")
    if not isinstance(values, dict):
        raise ConfigError(f"[{name}] must be a table of keys, got {values!r}")
    cls = SECTIONS[name]
    hints = typing.get_type_hints(cls)
    fields = attrs.fields_dict(cls)
    kwargs = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"unknown config key {name}.{key}{_closest(key, list(fields))}")
        kwargs[key] = _check_type(f"{name}.{key}", value, hints[key])
    return cls(**kwargs)


def config_from_dict(data: dict[str, Any]) -> Config:
    """Build a validated :class:`Config` from nested ``{section: {key: value}}``.

    Raises:
        ConfigError: unknown section or key (with the closest known one), wrong
            type, or out-of-range value.
    """
    return Config(**{name: section_from_dict(name, values) for name, values in data.items()})


def config_from_saved(data: dict[str, dict[str, Any]], **run: Any) -> Config:
    """Rebuild a config saved by :meth:`Config.to_dict` (absent optional keys are stored as None). A config
    saved before ``run.seed_scheme`` existed gets ``"offset"``, the seeding its run was trained with.

    ``run`` keys that are not None override the saved ``[run]`` section.
    """
    sections = {k: {n: v for n, v in sec.items() if v is not None} for k, sec in data.items()}
    sections.setdefault("run", {}).setdefault("seed_scheme", "offset")  # saved before the scheme existed
    sections["run"].update({k: v for k, v in run.items() if v is not None})
    return config_from_dict(sections)


# ----------------------------------------------------------------------------- files
def shipped_configs() -> list[str]:
    """The names of the configs shipped with the package (``ppo-core configs`` lists them)."""
    return sorted(p.stem for p in CONFIG_DIR.glob("*.toml"))


def config_extra(name: str) -> str | None:
    """The extra a shipped config needs, as its header comment names it ("Needs the atari extra"), or None."""
    found = re.search(r"needs the ([\w-]+) extra", (CONFIG_DIR / f"{name}.toml").read_text(), re.IGNORECASE)
    return found.group(1) if found else None


def resolve_config_path(name: str) -> Path:
    """Find ``name`` as given (relative to the current folder), then among the shipped configs (package
    data, so from any folder and any install); ``.toml`` may be left out. A path the user gives wins.

    Raises:
        ConfigError: if no such file exists (the message points to ``ppo-core configs``, or from Python
            to ``shell.config.shipped_configs()``).
    """
    candidates = [Path(name), CONFIG_DIR / name]
    if not name.endswith(".toml"):
        candidates += [Path(name + ".toml"), CONFIG_DIR / (name + ".toml")]
    for path in candidates:
        if path.is_file():
            return path
    close = difflib.get_close_matches(Path(name).stem, shipped_configs(), n=1, cutoff=0.7)
    hint = f"did you mean {close[0]!r}? " if close else ""
    raise ConfigError(f"config file {name!r} not found here or among the shipped configs; {hint}"
                      f"list them with: {said('configs')}")


def read_toml(path: Path) -> dict[str, Any]:
    """Parse a TOML file.

    Raises:
        ConfigError: unreadable file, or malformed TOML (with tomllib's line and column).
    """
    try:
        with open(path, "rb") as f:
            return tomllib.load(f)
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"malformed TOML in {path}: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"cannot read config file {path}: it is not UTF-8 text") from None


# ----------------------------------------------------------------------------- overrides
def split_key(path: str, usage: str = "section.key, e.g. ppo.gamma") -> tuple[str, str, str | None]:
    """Split a config key ``section.key`` into ``(section, key, None)``, or a name in a table key
    (``env.kwargs.size``) into ``(section, key, name)``, checking that the section and key exist.
    ``usage`` is what the message for a malformed path says is expected.

    Raises:
        ConfigError: a malformed path, an unknown section or key (with the closest known one), or
            a name under a key that is not a table.
    """
    section, dot, key = path.strip().partition(".")
    key, sep, sub = key.partition(".")
    if not dot or not section or not key or "." in sub or (sep and not sub):
        raise ConfigError(f"{path!r} is not a config key; expected {usage}")
    if section not in SECTIONS:
        raise ConfigError(f"unknown section {section!r}{_closest(section, list(SECTIONS))}")
    fields = attrs.fields_dict(SECTIONS[section])
    if key not in fields:
        raise ConfigError(f"unknown key {section}.{key}{_closest(key, list(fields))}")
    if sub and typing.get_origin(typing.get_type_hints(SECTIONS[section])[key]) is not dict:
        raise ConfigError(f"{section}.{key} is not a table, so {path} names nothing")
    return section, key, sub or None


def parse_override(text: str) -> tuple[str, str, str | None, Any]:
    """Split ``section.key=value`` into ``(section, key, None, value)``; the value is parsed as TOML,
    else kept as a string.

    A table key takes one more level: ``env.kwargs.continuous=true`` gives
    ``("env", "kwargs", "continuous", True)``, merged into the table by :func:`load_config`.

    Raises:
        ConfigError: if the text is not of the form ``section.key=value`` (or
            ``section.table.name=value``), names an unknown section or key, or gives a value of the
            wrong type for its key.
    """
    path, sep, raw = text.partition("=")
    usage = f"section.key=value, e.g. {said('set_entry', 'ppo.gamma=0.99')}"
    if not sep:
        raise ConfigError(f"{said('set', text)}: expected {usage}")
    try:
        section, key, sub = split_key(path, usage)
    except ConfigError as exc:
        raise ConfigError(f"{said('set', text)}: {exc}") from None
    try:
        value = tomllib.loads(f"v = {raw}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw
    if sub is None:  # a wrong type is named with its flag here; a name in a table key takes any value
        try:
            _check_type(f"{section}.{key}", value, typing.get_type_hints(SECTIONS[section])[key])
        except ConfigError as exc:
            hint = _toml_hint(section, key, raw)
            message = f"{said('set', text)}: {exc}; {hint}"
            if len(message) > MAX_MESSAGE:  # the value quoted twice: what was expected, and the example
                message = f"{said('set', text)}: {str(exc).split('; ', 1)[-1]}; {hint}"
            if len(message) > MAX_MESSAGE:  # the example would make a long line longer: the advice alone
                message = f"{said('set', text)}: {exc}; write it as TOML"
            raise ConfigError(message) from None
    return section, key, sub, value


# ----------------------------------------------------------------------------- hints
#: The longest one-line message a --set hint may make (the CLI adds "error: " for a line of at most 200).
MAX_MESSAGE = 193
TRUE_WORDS, FALSE_WORDS = {"true", "yes", "on", "1", "t", "y"}, {"false", "no", "off", "0", "f", "n"}
# Examples of a type, for a --set hint where neither the value given nor the key's default will do.
TYPE_EXAMPLES: dict[Any, Any] = {
    int: 1000, float: 0.01, str: "name", list[int]: [64, 64], list[str]: ["a", "b"], dict[str, Any]: {"name": 1},
    list[dict[str, Any]]: [{"class": "gymnasium.wrappers:ClipReward", "kwargs": {"min_reward": -1.0,
                                                                                 "max_reward": 1.0}}],
}


def _reading(raw: str, annotation: Any) -> Any:
    """What ``raw`` (a --set value that is not valid TOML of the key's type) most likely means as a value
    of ``annotation``: ``True`` -> True, ``.5`` -> 0.5, ``64,64`` or ``(64 64)`` -> [64, 64], any text for a
    string; None when it reads as nothing."""
    text = raw.strip()
    if annotation is str:
        return raw
    if annotation is bool:
        word = text.lower()
        return True if word in TRUE_WORDS else False if word in FALSE_WORDS else None
    if annotation in (int, float):
        try:
            number = float(text.replace("_", ""))
        except ValueError:
            return None
        return number if annotation is float else int(number) if number.is_integer() else None
    if typing.get_origin(annotation) is list and text:
        (item,) = typing.get_args(annotation)
        if text[0] + text[-1] in ("[]", "()"):
            text = text[1:-1]
        parts = [p for p in re.split(r"[,\s]+" if "," in text else r"\s+", text.strip()) if p]
        values = []
        for part in parts:
            try:
                value = tomllib.loads(f"v = {part}")["v"]
            except tomllib.TOMLDecodeError:
                value = _reading(part, item)
            values.append(value)
        return values if parts else None
    return None


def _toml_hint(section: str, key: str, raw: str) -> str:
    """How to write a valid value of ``section.key`` on the command line: ``raw`` spelled as TOML when it
    reads as a valid value (see :func:`_reading`), else the key's default or an example of its type."""
    cls = SECTIONS[section]
    annotation = typing.get_type_hints(cls)[key]
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))

    def valid(value: Any) -> bool:
        try:
            section_from_dict(section, {key: value})
        except ConfigError:
            return False
        return value is not None

    def spelled(value: Any) -> str:
        return said("set_entry", f"{section}.{key}={toml_value(value)}")

    reading = _reading(raw, annotation)
    if valid(reading):
        return f"write it as TOML: {spelled(reading)}"
    if annotation is bool:
        return f"write it as TOML: {spelled(True)} (or false)"
    default = attrs.fields_dict(cls)[key].default
    default = default.factory() if isinstance(default, attrs.Factory) else default
    example = default if default not in (None, [], {}) and valid(default) else TYPE_EXAMPLES.get(annotation)
    return f"write it as TOML, e.g. {spelled(example)}" if valid(example) else "write it as TOML"


# ----------------------------------------------------------------------------- file + overrides + flags
def resolve_kwarg_paths(kwargs: dict[str, Any], base: Path) -> dict[str, Any]:
    """``env.kwargs`` with each string value that names an existing file or folder relative to ``base``
    replaced by its absolute path (such as MuJoCo's ``xml_file``), so a saved config rebuilds the
    same env from any folder. Absolute paths, other strings and other values are kept as they are;
    nested tables and lists are not searched.
    """
    out = dict(kwargs)
    for name, value in kwargs.items():
        if not isinstance(value, str) or not value or os.path.isabs(value):
            continue
        try:
            found = (base / value).exists()
        except (OSError, ValueError):  # a name the file system cannot hold is no path
            found = False
        if found:
            out[name] = os.path.abspath(base / value)
    return out


def load_config(name: str | None, overrides: Sequence[str] | Mapping[str, Any] = (), **explicit: Any) -> Config:
    """Load a config file, apply ``--set`` overrides, then explicit flags (which win).

    A ``[tune]`` section in the file (the search space of ``main.py tune``) is ignored.

    Args:
        name: config file name or path (``None`` = all defaults).
        overrides: ``section.key=value`` strings, or a ``{"section.key": value}`` mapping
            (see :func:`apply_overrides`).
        explicit: ``run`` keys from explicit CLI flags (``seed``, ``total_timesteps``,
            ``device``); ``None`` values are ignored.

    Raises:
        ConfigError: see :func:`read_toml`, :func:`parse_override`, :func:`config_from_dict`.
    """
    data: dict[str, Any] = {}
    if name is not None:
        path = resolve_config_path(name)
        data = read_toml(path)
        env = data.get("env")
        if isinstance(env, dict) and isinstance(env.get("kwargs"), dict):
            env["kwargs"] = resolve_kwarg_paths(env["kwargs"], path.parent)
    data = {k: v for k, v in data.items() if k != TUNE_SECTION}
    return apply_overrides(data, overrides, **explicit)


def apply_overrides(data: dict[str, Any], overrides: Sequence[str] | Mapping[str, Any] = (),
                    **explicit: Any) -> Config:
    """Build a :class:`Config` from nested ``{section: {key: value}}`` data with overrides applied.

    ``overrides`` are ``section.key=value`` strings (``--set``), or a mapping of
    ``"section.key"`` (or ``"section.table.name"``) to values. A name in a table key
    (``env.kwargs.size``) adds to or replaces in the table; ``env.kwargs`` paths given here are
    relative to the current folder (:func:`resolve_kwarg_paths`). ``explicit`` ``run`` keys win;
    ``None`` values are ignored. ``data`` is not modified.

    Raises:
        ConfigError: a malformed or unknown key, and see :func:`config_from_dict`.
    """
    data = {k: dict(v) if isinstance(v, dict) else v for k, v in data.items()}
    if isinstance(overrides, Mapping):
        items = []
        for path, value in overrides.items():
            try:
                items.append((*split_key(path), value))
            except ConfigError as exc:
                raise ConfigError(f"overrides key {path!r}: {exc}") from None
    else:
        items = [parse_override(text) for text in overrides]
    for section, key, name, value in items:
        if (section, key) == ("env", "kwargs"):  # paths given on the command line are relative to the current folder
            if name is not None:
                value = resolve_kwarg_paths({name: value}, Path.cwd())[name]
            elif isinstance(value, dict):
                value = resolve_kwarg_paths(value, Path.cwd())
        table = data.setdefault(section, {})
        if name is None:
            table[key] = value
        else:  # --set env.kwargs.name=... adds to (or replaces in) the file's table
            table[key] = {**(table[key] if isinstance(table.get(key), dict) else {}), name: value}
    for key, value in explicit.items():
        if value is not None:
            data.setdefault("run", {})[key] = value
    return config_from_dict(data)


# ----------------------------------------------------------------------------- the dump
def dump_toml(config: Config) -> str:
    """Render a config as TOML (the resolved config written into the run dir)."""
    lines: list[str] = []
    for name, values in config.to_dict().items():
        lines.append(f"[{name}]")
        for key, value in values.items():
            if value is None:
                continue
            lines.append(f"{key} = {toml_value(value)}")
        lines.append("")
    return "\n".join(lines)


def toml_value(value: Any) -> str:
    """``value`` as TOML writes it (``true``, ``"text"``, ``[64, 64]``), for files and messages."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{_toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + " }"
    return repr(value)


def _toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() else toml_value(key)
