"""Atomic checkpoint files, loaded with ``weights_only=True`` so they cannot run code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from shell.errors import ConfigError
from shell.files import atomic_write

FORMAT_VERSION = 1


def save_checkpoint(path: Path, state: dict[str, Any], on_written: Callable[[], None] | None = None) -> Path:
    """Write ``state`` (plus the format version) to ``path`` atomically.

    The bytes go to a temporary file in the same folder, are fsynced, then
    renamed over ``path``: a reader sees the old file or the new one, never a
    partial one. ``on_written`` is called between the fsync and the rename (the
    fault-injection point of shell/faults.py).
    """
    return atomic_write(path, lambda f: torch.save({"format_version": FORMAT_VERSION, **state}, f), on_written)


def latest_checkpoint(folder: Path) -> Path:
    """The newest ``ckpt_*.pt`` in ``folder`` (names sort by env step).

    Raises:
        ConfigError: if there is none.
    """
    found = sorted(Path(folder).glob("ckpt_*.pt"))
    if not found:
        raise ConfigError(f"no checkpoint (ckpt_*.pt) in {folder}")
    return found[-1]


def load_checkpoint(path: Path, map_location: str | torch.device = "cpu") -> dict[str, Any]:
    """Load a checkpoint written by :func:`save_checkpoint`.

    Raises:
        ConfigError: missing, truncated or corrupt file, or an unknown format version.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"checkpoint {path} not found")
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as exc:
        raise ConfigError(f"checkpoint {path} is truncated or corrupt ({type(exc).__name__})") from None
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        version = state.get("format_version") if isinstance(state, dict) else None
        raise ConfigError(f"checkpoint {path} has format version {version!r}; this library reads {FORMAT_VERSION}")
    return state
