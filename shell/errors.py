"""Exceptions the CLI turns into one-line messages and exit codes, and the words those messages use for the
inputs they point to: the Python API's arguments, or the command line's flags (:func:`said`)."""

from __future__ import annotations

import contextlib
import shlex
from collections.abc import Iterator
from os import PathLike
from typing import Any


class ConfigError(ValueError):
    """Bad input found at start-up: config, flags, files, spaces (exit code 2)."""


class TrainingError(RuntimeError):
    """A failure during training: non-finite loss, an env that raises (exit code 1)."""


class ExportError(RuntimeError):
    """An export that failed: the exporter refused the policy, or the written file does not act as the
    policy does (exit code 1)."""


def first_line(exc: BaseException, *, with_type: bool = False) -> str:
    """The first line of an exception's message ("" for none), for one-line errors and warnings.

    With ``with_type``: ``Type: first line`` (the type's name alone for an empty message).
    """
    text = str(exc).strip()
    line = text.splitlines()[0] if text else ""
    if not with_type:
        return line
    return f"{type(exc).__name__}: {line}" if line else type(exc).__name__


def space_text(space: object, limit: int = 72) -> str:
    """A gymnasium space as a one-line message names it: its ``str``, or where that is longer than ``limit`` (a
    Box with bounds per component, a nest of spaces) a summary, ``Box(shape (3, 4), float32, bounds per
    component)`` or ``Tuple of 3 spaces``, never longer than ``limit`` (for a space of no fixed shape, cut with
    ``...``), so that the message stays one short line: a message that names two spaces gives each a smaller
    ``limit`` (tests/fuzz/test_found.py checks every such message's longest line)."""
    text = " ".join(str(space).split())
    if len(text) <= limit:
        return text
    name = type(space).__name__
    parts = getattr(space, "spaces", None)
    if parts is not None:  # a Dict names its keys where they fit in the limit too
        summary = f"{name} of {len(parts)} spaces"
        keys = f" ({', '.join(map(str, parts))})" if isinstance(parts, dict) else ""
        return summary + keys if len(summary + keys) <= limit else summary
    shape, dtype = getattr(space, "shape", None), getattr(space, "dtype", None)
    if shape is None or dtype is None:  # a space of no fixed shape (Text, Graph, a custom one): its text, cut
        return clipped(text if text.startswith(name) else f"{name}: {text}", limit)
    summary = f"{name}(shape {tuple(shape)}, {dtype}, bounds per component)"
    return summary if len(summary) <= limit else clipped(f"{name}(shape {tuple(shape)}, {dtype})", limit)


def clipped(text: str, limit: int = 80) -> str:
    """``text`` on one line, cut to ``limit`` characters with ``...`` (a user's long value quoted in a message)."""
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ----------------------------------------------------------------------------- one message, two front ends
#: How each front end names an input a message points to: ``name: (the Python API's words, the command line's)``.
#: ``{v}`` is the value (``{v!r}`` as Python writes it), ``{q}`` the value quoted for a shell. The one table of
#: both vocabularies: a message below the API says ``said("run_dir", path)``, never ``--run-dir`` itself.
WORDS: dict[str, tuple[str, str]] = {
    "run_dir": ("run_dir={v!r}", "--run-dir {v}"),
    "resume": ("shell.resume({v!r})", "--resume {v}"),
    "train_again": ("train it again with shell.train", "train it again, without --resume,"),
    "total_timesteps": ("total_timesteps={v}", "--total-timesteps {v}"),
    "seed": ("seed={v}", "--seed {v}"),
    "set": ("overrides entry {v!r}", "--set {v!r}"),  # a bad ``section.key=value`` text
    "set_entry": ("{v!r}", "--set {q}"),  # how to write one
    "configs": ("shell.config.shipped_configs()", "ppo-core configs"),
    "episodes": ("episodes={v}", "--episodes {v}"),
    "video": ("video=True", "--video"),
    "video_episodes": ("video_episodes={v}", "--video-episodes {v}"),
    "format": ("format={v!r}", "--format {v}"),
    "out": ("out={v!r}", "--out {v}"),
    "seat": ("seat={v!r}", "--seat {v!r}"),
    "evaluate": ("shell.evaluate({v!r})", "ppo-core eval {v}"),
    "evaluate_env": ("shell.evaluate({v!r}, env=<game factory>)", "ppo-core eval {v}"),
    "resume_instead": ("its script calling shell.resume({v!r}) in place of shell.train",  # a torchrun command
                       "--resume {v} in place of --config, --run-dir and --set"),
}
FRONT_ENDS = ("python", "cli")
_speaking = "python"  # the library's default; the CLI sets "cli" for its process (shell/cli.py, main)


@contextlib.contextmanager
def front_end(name: str) -> Iterator[None]:
    """Messages say :data:`WORDS` in ``name``'s words (``"python"`` or ``"cli"``) inside the block, in every thread
    of the process (the CLI owns its process: ``shell.cli.main`` runs in ``front_end("cli")``)."""
    global _speaking
    if name not in FRONT_ENDS:
        raise ValueError(f"front_end {name!r}: expected one of {list(FRONT_ENDS)}")
    previous, _speaking = _speaking, name
    try:
        yield
    finally:
        _speaking = previous


def said(name: str, value: Any = None) -> str:
    """The input ``name`` of :data:`WORDS` as the front end in use says it: ``said("run_dir", "nim-run")`` is
    ``run_dir='nim-run'`` from Python and ``--run-dir nim-run`` on the command line; without ``value`` the name
    alone (``run_dir``, ``--run-dir``)."""
    template = WORDS[name][FRONT_ENDS.index(_speaking)]
    if value is None:
        return template.split("{", 1)[0].rstrip(" =(")
    value = str(value) if isinstance(value, PathLike) else value
    return template.format(v=value, q=shlex.quote(str(value)))
