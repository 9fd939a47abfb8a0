"""Per-update logs that survive crashes and resumes: metrics.csv and TensorBoard.

Contract (DESIGN.md, "Files other tools read"): ``RUN_DIR/metrics.csv`` starts with a header whose
first column is ``update`` and holds one row per finished update, each update exactly once, even
after a crash, a ``kill -9`` or a resume. Three rules give that:

- every row (CSV and TensorBoard) is flushed to the OS as soon as it is written: ``kill -9``
  cannot lose a flushed row;
- the runner writes an update's row before that update's checkpoint, so a checkpoint never
  covers an update whose row is missing;
- a resume from the checkpoint of update ``k`` first rewrites the file atomically with its header
  and only the complete rows of updates ``1..k`` (a torn last line, rows written after the
  checkpoint, and duplicates are dropped); the resumed run then writes ``k+1`` onwards.

TensorBoard gets the same treatment through ``SummaryWriter(purge_step=...)``.
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


def _complete_rows(path: Path, up_to_update: int) -> list[dict[str, str]]:
    """The rows of updates ``1..up_to_update`` in ``path``, first occurrence of each, torn lines dropped."""
    if not path.exists():
        return []
    text = path.read_text(errors="replace")
    lines = text.splitlines(keepends=True)
    if lines and not lines[-1].endswith("\n"):
        lines.pop()  # a row torn by a kill in the middle of a write
    rows: dict[int, dict[str, str]] = {}
    for record in csv.reader(lines):
        if len(record) != len(CSV_FIELDS) or record[0] == "update":
            continue  # a header (also one written in the middle by an old resume) or a malformed line
        try:
            update = int(record[0])
        except ValueError:
            continue
        if 1 <= update <= up_to_update and update not in rows:
            rows[update] = dict(zip(CSV_FIELDS, record, strict=True))
    return [rows[u] for u in sorted(rows)]


class RunLogs:
    """metrics.csv and TensorBoard of one run (rank 0 only), opened at update ``update``.

    Opening repairs metrics.csv to the header plus the rows of updates ``1..update`` (see the
    module docstring); ``write`` appends one row and flushes it; ``close`` closes both.
    """

    def __init__(self, run_dir: Path, update: int, env_steps: int):
        from torch.utils.tensorboard import SummaryWriter  # imported late: it is the slowest import

        run_dir = Path(run_dir)
        self.path = run_dir / "metrics.csv"
        buffer = io.StringIO(newline="")
        writer = csv.DictWriter(buffer, fieldnames=CSV_FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(_complete_rows(self.path, update))
        atomic_write(self.path, lambda f: f.write(buffer.getvalue().encode()))
        self._file = open(self.path, "a", newline="")
        self._csv = csv.DictWriter(self._file, fieldnames=CSV_FIELDS, lineterminator="\n")
        # events after the checkpoint's own step are purged (its update's row was written before it)
        self._tensorboard = SummaryWriter(log_dir=str(run_dir / "tensorboard"),
                                          purge_step=env_steps + 1 if env_steps else None)

    def write(self, row: dict[str, Any]) -> None:
        """Append one update's row to metrics.csv (flushed) and its scalars to TensorBoard."""
        self._csv.writerow({k: row[k] for k in CSV_FIELDS})
        self._file.flush()
        for key in CSV_FIELDS[2:]:
            if row[key] != "":
                group = "charts" if key.startswith(("episodic", "eval")) else "train"
                self._tensorboard.add_scalar(f"{group}/{key}", row[key], row["env_steps"])
        self._tensorboard.flush()

    def close(self) -> None:
        self._file.close()
        self._tensorboard.close()
