"""Pages and snippets generated from the code, for the docs site (``hooks.py``) and its tests.

- :func:`config_reference`: reference/config.md, one table per config section of ``shell/config.py``
  (its attrs classes: each key's type, default, allowed values and one-line help);
- :func:`cli_help`: the ``--help`` text of a subcommand, from the parsers of ``shell/cli.py``;
- :func:`render_not_run`: the ``<!-- not-run: REASON -->`` marker before a code block, made visible.

Nothing here imports mkdocs, so the tests can import it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import re
import typing
from collections.abc import Iterator
from typing import Any

import attrs

NOT_RUN = re.compile(r"^(?P<indent>[ \t]*)<!--\s*not-run:\s*(?P<reason>.*?)\s*-->[ \t]*$", re.M)


# ----------------------------------------------------------------------------- config keys
def _annotation(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def config_sections() -> Iterator[tuple[str, type]]:
    """``(section name, attrs class)`` of every config section, nested ones (an attrs class as a key's
    type, such as ``[run.wandb]``) after their parent, as ``[section.key]``."""
    from shell.config import SECTIONS

    def walk(name: str, cls: type) -> Iterator[tuple[str, type]]:
        yield name, cls
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if isinstance(annotation, type) and attrs.has(annotation):
                yield from walk(f"{name}.{field.name}", annotation)

    for name, cls in SECTIONS.items():
        yield from walk(name, cls)


def config_keys() -> Iterator[tuple[str, attrs.Attribute, type]]:
    """``(section.key, attrs field, section class)`` of every leaf key (not the nested sections)."""
    for section, cls in config_sections():
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if not (isinstance(annotation, type) and attrs.has(annotation)):
                yield f"{section}.{field.name}", field, cls


def key_type(field: attrs.Attribute) -> str:
    """The key's type as written in config.py, without ``| None`` (None is an absent key)."""
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    parts = [p.strip() for p in re.split(r"\|(?![^\[]*\])", text)]
    return " | ".join(p for p in parts if p != "None")


def key_default(field: attrs.Attribute) -> str:
    """The default as TOML spells it; ``absent`` for None."""
    from shell.config import toml_value

    default = field.default
    if isinstance(default, attrs.Factory):
        default = default.factory()
    if default is None:
        return "absent"
    if default == {}:
        return "{}"
    return toml_value(default)


def _validators(validator: Any) -> Iterator[Any]:
    if validator is None:
        return
    inner = getattr(validator, "_validators", None)  # attrs.validators.and_
    if inner is not None:
        for v in inner:
            yield from _validators(v)
    else:
        yield validator


def key_allowed(field: attrs.Attribute) -> str:
    """What the key's validators allow, as markdown (code spans); ``true, false`` for a bool; "" when
    nothing beyond the type is checked."""
    from shell.config import toml_value

    parts = []
    for validator in _validators(field.validator):
        choices = getattr(validator, "choices", None) or getattr(validator, "options", None)
        if choices is not None:
            parts.append(", ".join(f"`{toml_value(c)}`" for c in choices))
        elif getattr(validator, "allowed", None):
            text = validator.allowed
            parts.append(f"`{text}`" if re.match(r"^[\[\(<>]", text) else text)
    if not parts and key_type(field) == "bool":
        parts.append("`true`, `false`")
    return "; ".join(parts)


def key_help(field: attrs.Attribute) -> str:
    return field.metadata.get("help", "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """reference/config.md: every key of every section, generated from shell/config.py."""
    lines = [
        "---",
        "hide:",
        "  - toc",
        "---",
        "",
        "# Config keys",
        "",
        "<!-- Generated from shell/config.py by docs/hooks/generate.py at build time: do not edit. -->",
        "",
        "Every key of a run's TOML config, generated from the attrs classes of `shell/config.py` "
        "when the site is built. A key left out of a file takes its default; *absent* means the key "
        "has no value unless one is given (what that means is in its description). Set a key in a file, "
        "with `--set section.key=value` on the command line (the value parsed as TOML, else taken as a "
        "string), or with `overrides={\"section.key\": value}` from Python. A bad value stops the run "
        "before anything starts, with one line naming the key, the value and what is allowed "
        "(exit code 2).",
        "",
        "```toml",
        "[env]",
        'id = "CartPole-v1"',
        "num_envs = 8",
        "",
        "[ppo]",
        "learning_rate = 1e-3",
        "```",
        "",
        "The `[tune]` and `[tune.space]` tables of `ppo-core tune` are described in "
        "[Tuning](../guides/tuning.md); training ignores them.",
        "",
    ]
    for section, cls in config_sections():
        lines += [f"## [{section}]", ""]
        doc = (cls.__doc__ or "").strip()
        if doc:
            lines += [doc, ""]
        lines += ["| Key | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if isinstance(annotation, type) and attrs.has(annotation):
                lines.append(f'| <span id="{section}.{field.name}"></span>`{field.name}` | table | | | '
                             f"The [{section}.{field.name}] section below. |")
                continue
            row = [f'<span id="{section}.{field.name}"></span>`{field.name}`', f"`{_cell(key_type(field))}`",
                   f"`{_cell(key_default(field))}`", _cell(key_allowed(field)), _cell(key_help(field))]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI help
def cli_help(command: str) -> str:
    """The ``--help`` text of ``ppo-core`` (``command`` "train") or of a subcommand, 82 columns wide
    (what a code block of the site shows without scrolling)."""
    from shell import cli

    parsers = {"train": cli.train_parser, "configs": cli.configs_parser, "eval": cli.eval_parser,
               "plot": cli.plot_parser, "export": cli.export_parser, "tune": cli.tune_parser}
    if command not in parsers:
        raise KeyError(f"no CLI command {command!r}; one of {sorted(parsers)}")
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "82"
    try:
        parser: argparse.ArgumentParser = parsers[command]()
        parser.prog = "ppo-core" if command == "train" else f"ppo-core {command}"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            parser.print_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return out.getvalue().rstrip()


CLI_HELP = re.compile(r"^<!--\s*cli-help:\s*(?P<command>[\w-]+)\s*-->[ \t]*$", re.M)


def render_cli_help(markdown: str) -> str:
    """Each ``<!-- cli-help: COMMAND -->`` line (outside code blocks) replaced by that command's
    ``--help`` as a text block."""
    return _outside_fences(markdown, lambda text: CLI_HELP.sub(
        lambda m: f"```text\n{cli_help(m.group('command'))}\n```", text))


# ----------------------------------------------------------------------------- tune's default space
DEFAULT_SPACE_MARK = re.compile(r"^(?P<indent>[ \t]*)<!--\s*tune-default-space\s*-->[ \t]*$", re.M)


def default_space_toml() -> str:
    """``shell.tune.space.DEFAULT_SPACE`` as the ``[tune.space]`` table a config would write."""
    from shell.config import toml_value
    from shell.tune.space import DEFAULT_SPACE

    lines = ["[tune.space]"]
    for key, dist in DEFAULT_SPACE.items():
        lines.append(f"{key} = {{ " + ", ".join(f"{name} = {toml_value(v)}" for name, v in dist.items()) + " }")
    return "\n".join(lines)


def render_default_space(markdown: str) -> str:
    """Each ``<!-- tune-default-space -->`` line (outside code blocks) replaced by the default search
    space as a TOML block, at the marker's indentation."""
    def block(m: re.Match) -> str:
        indent = m.group("indent")
        body = "\n".join(indent + line for line in default_space_toml().splitlines())
        return f"{indent}```toml\n{body}\n{indent}```"
    return _outside_fences(markdown, lambda text: DEFAULT_SPACE_MARK.sub(block, text))


FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def _outside_fences(markdown: str, change: Any) -> str:
    """``change`` applied to the text between fenced code blocks; the blocks stay as they are."""
    out, chunk, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        m = FENCE.match(line)
        if fence is None and m:
            out.append(change("".join(chunk)))
            chunk, fence = [line], m.group(1)
        elif fence is not None:
            chunk.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                out.append("".join(chunk))
                chunk, fence = [], None
        else:
            chunk.append(line)
    out.append("".join(chunk) if fence is not None else change("".join(chunk)))
    return "".join(out)


# ----------------------------------------------------------------------------- not-run markers
def render_not_run(markdown: str) -> str:
    """Each ``<!-- not-run: REASON -->`` line (the line before a code block the tests do not run) made
    visible: a note admonition with the reason, at the marker's indentation (inside a list item too)."""

    def note(match: re.Match) -> str:
        indent = match.group("indent")
        reason = match.group("reason").replace('"', "'")
        return f'{indent}!!! note "Not run by the tests: {reason}"\n\n'

    return _outside_fences(markdown, lambda text: NOT_RUN.sub(note, text))
