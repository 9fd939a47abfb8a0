"""TensorBoard: each row's scalars at ``step = env_steps``, written and flushed on the training thread as
the row arrives (a local file, as metrics.csv). A resume purges the events after the checkpoint's step
(``SummaryWriter(purge_step=...)``), so each update is in the event files once."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from shell.logs import CSV_FIELDS, GAME_FIELDS
from shell.tracking.base import Logger, RunStart

SCALARS = CSV_FIELDS[2:]  # metrics.csv's columns after update and env_steps (the step), in its order
CHARTS = {"elo": "charts"}  # GAME_FIELDS: a turn-based game's columns, where its row has them


class TensorBoardLogger(Logger):
    """``RUN_DIR/tensorboard``: ``train/<column>`` and ``charts/episodic_*``, ``charts/eval_return`` (and a
    turn-based game's ``charts/elo``); in a run of
    several lanes also ``lanes/<group>/<metric>``."""

    name = "tensorboard"

    def __init__(self, start: RunStart):
        from torch.utils.tensorboard import SummaryWriter  # imported late: it is the slowest import

        # events after the checkpoint's own step are purged (its update's row was written before it)
        self._writer = SummaryWriter(log_dir=str(start.run_dir / "tensorboard"),
                                     purge_step=start.env_steps + 1 if start.env_steps else None)

    def log(self, row: Mapping[str, Any]) -> None:
        for key in SCALARS:
            value = row[key]
            if value == "":
                continue
            group = "charts" if key.startswith(("episodic", "eval")) else "train"
            self._writer.add_scalar(f"{group}/{key}", value, row["env_steps"])
        for key in GAME_FIELDS:
            if row.get(key, "") != "":
                self._writer.add_scalar(f"{CHARTS[key]}/{key}", row[key], row["env_steps"])
        for key, value in row.items():  # a run of several lanes: each group's own metrics, "<group>/<metric>"
            if "/" in key and value != "":
                self._writer.add_scalar(f"lanes/{key}", value, row["env_steps"])
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()
