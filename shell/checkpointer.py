"""Where a run's checkpoints go: ``RUN_DIR/checkpoints/ckpt_<env_steps, 12 digits>.pt`` written atomically,
the newest ``run.keep_checkpoints`` kept, ``best.pt`` beside them, and the loggers told which updates a
checkpoint now covers (trackers send a row only once a checkpoint covers it, so a resume never sends one
twice: shell/tracking/)."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

from shell.checkpoint import save_checkpoint
from shell.tracking import Loggers


class Checkpointer:
    """The checkpoints of one run (files on rank 0; see the module doc).

    Args:
        run_dir: the run's folder.
        keep: how many ``ckpt_*.pt`` to keep (the newest).
        is_main: this process writes the files (rank 0).

    Attributes:
        loggers: told ``checkpointed(update)`` after every save (set by the trainer while it trains).
        saved_update: the update of the newest checkpoint this run saved (None before the first).
    """

    def __init__(self, run_dir: Path, keep: int, is_main: bool):
        self.folder = Path(run_dir) / "checkpoints"
        self.keep, self.is_main = keep, is_main
        self.loggers = Loggers()
        self.saved_update: int | None = None

    def save(self, state: dict[str, Any], update: int, env_steps: int,
             on_written: Callable[[], None] | None = None) -> Path:
        """Atomically write ``state`` as ``ckpt_<env_steps>.pt`` (rank 0); keep the newest ``keep``.

        ``on_written`` is called between the fsync and the rename (the fault-injection point).
        """
        path = self.folder / f"ckpt_{env_steps:012d}.pt"
        if self.is_main:
            save_checkpoint(path, state, on_written=on_written)
            for old in sorted(self.folder.glob("ckpt_*.pt"))[: -self.keep]:
                old.unlink()
            self.loggers.checkpointed(update)  # trackers get rows once a checkpoint covers them
        self.saved_update = update
        return path

    def mark_best(self, checkpoint: Path) -> None:
        """Copy ``checkpoint`` to ``best.pt`` beside it, atomically (rank 0)."""
        if not self.is_main:
            return
        tmp = checkpoint.with_name(".best.pt.tmp")
        shutil.copyfile(checkpoint, tmp)
        tmp.replace(checkpoint.with_name("best.pt"))

    def note(self) -> str:
        """Where the last good checkpoint is, for a failure message (none may have been written yet)."""
        found = sorted(self.folder.glob("ckpt_*.pt"))
        if not found:
            return "no checkpoint was written yet"
        return f"the last good checkpoint is {found[-1]}"
