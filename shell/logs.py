"""The per-update record that survives crashes and resumes: metrics.csv (TensorBoard, W&B and MLflow are
loggers in shell/tracking/, fed with the same rows).

Contract (DESIGN.md, "Files other tools read"): ``RUN_DIR/metrics.csv`` starts with a header whose
first column is ``update`` and holds one row per finished update, each update exactly once, even
after a crash, a ``kill -9`` or a resume. Three rules give that:

- every row is flushed to the OS as soon as it is written: ``kill -9`` cannot lose a flushed row;
- the runner writes an update's row before that update's checkpoint, so a checkpoint never
  covers an update whose row is missing;
- a resume from the checkpoint of update ``k`` first rewrites the file atomically with its header
  and only the complete rows of updates ``1..k`` (a torn last line, rows written after the
  checkpoint, and duplicates are dropped); the resumed run then writes ``k+1`` onwards.

TensorBoard gets the same treatment through ``SummaryWriter(purge_step=...)`` (shell/tracking/tensorboard.py).
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from shell.files import atomic_write

CSV_FIELDS = ("update", "env_steps", "seconds", "sps", "learning_rate", "policy_loss", "value_loss", "entropy",
              "approx_kl", "clipfrac", "explained_variance", "grad_norm", "epochs", "episodic_return",
              "episodic_length", "eval_return")

GAME_FIELDS = ("elo",)
"""The columns a turn-based game's metrics.csv adds after :data:`CSV_FIELDS`: ``elo``, the policy's Elo rating
at the update's evaluation (``""`` in an update without one; shell/games/ratings.py)."""

LANE_FIELDS = ("update", "env_steps", "policy_loss", "value_loss", "entropy", "approx_kl", "clipfrac",
               "explained_variance", "grad_norm", "epochs", "episodic_return", "episodic_length")
"""The columns of ``metrics.<group>.csv``: one lane's own update metrics and episodes, in a run of several lanes
(metrics.csv keeps the mean over the lanes)."""


def lane_file(group: str) -> str:
    """The file name of a lane's metrics: ``metrics.<group>.csv``."""
    return f"metrics.{group}.csv"


def complete_rows(path: Path, up_to_update: int, fields: tuple[str, ...] = CSV_FIELDS) -> list[dict[str, str]]:
    """The rows of updates ``1..up_to_update`` in ``path`` (of columns ``fields``), first occurrence of each,
    torn lines dropped. A row of only the first ``len(CSV_FIELDS)`` columns (a game's run written before
    :data:`GAME_FIELDS`) gets ``""`` in the others."""
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()  # a row torn by a kill in the middle of a write
    rows: dict[int, dict[str, str]] = {}
    for record in csv.reader(lines):
        if len(record) == len(CSV_FIELDS) < len(fields) and fields[:len(CSV_FIELDS)] == CSV_FIELDS:
            record = record + [""] * (len(fields) - len(CSV_FIELDS))
        if len(record) != len(fields) or record[0] == "update":
            continue  # a header (also one written in the middle by an old resume) or a malformed line
        try:
            update = int(record[0])
        except ValueError:
            continue
        if 1 <= update <= up_to_update and update not in rows:
            rows[update] = dict(zip(fields, record, strict=True))
    return [rows[u] for u in sorted(rows)]


class RunLogs:
    """metrics.csv of one run (rank 0 only), or a lane's ``metrics.<group>.csv`` (``name``, columns ``fields``),
    opened at update ``update``.

    Opening repairs metrics.csv to the header plus the rows of updates ``1..update`` (see the
    module docstring; :attr:`done_rows` keeps them); ``write`` appends one row and flushes it.
    """

    def __init__(self, run_dir: Path, update: int, name: str = "metrics.csv", fields: tuple[str, ...] = CSV_FIELDS):
        run_dir = Path(run_dir)
        self.path = run_dir / name
        self.fields = fields
        self.done_rows = complete_rows(self.path, update, fields)
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=fields, lineterminator="\n")
        writer.writeheader()
        writer.writerows(self.done_rows)
        atomic_write(self.path, lambda f: f.write(buffer.getvalue().encode()))
        self._file = open(self.path, "a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=fields, lineterminator="\n")

    def write(self, row: dict[str, Any]) -> None:
        """Append one update's row (flushed)."""
        self._csv.writerow({k: row[k] for k in self.fields})
        self._file.flush()

    def close(self) -> None:
        self._file.close()
