"""Atomic file writes: a reader sees the old file or the new one, never a partial one."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import IO

_UMASK = os.umask(0)
os.umask(_UMASK)


def atomic_write(path: Path, write: Callable[[IO[bytes]], None], on_written: Callable[[], None] | None = None) -> Path:
    """Write ``path`` atomically: ``write(f)`` fills a temporary file in the same folder, which is
    fsynced, given the permissions a plain ``open`` would give (``0o666`` less the umask), and
    renamed over ``path``. ``on_written`` runs between the fsync and the rename (the
    fault-injection point of shell/faults.py). On any error the temporary file is removed.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o666 & ~_UMASK)  # mkstemp creates 0600
        if on_written is not None:
            on_written()
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def new_run_folder(name: str, parent: Path = Path("runs")) -> Path:
    """``parent/<name>__<YYYYmmdd-HHMMSS>`` (a run dir, a study dir), with ``-1``, ``-2``, ... appended
    while that path exists. Nothing is created."""
    base = parent / f"{name}__{datetime.now().strftime('%Y%m%d-%H%M%S')}"
    path, i = base, 1
    while path.exists():
        path, i = base.with_name(f"{base.name}-{i}"), i + 1
    return path
