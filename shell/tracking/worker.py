"""Trackers off the training thread: a :class:`QueuedTracker` runs one tracker's client (a
:class:`TrackerBackend`) on its own thread behind a bounded queue.

Rows reach the tracker only once a checkpoint covers them (:meth:`Logger.checkpointed`), plus every
row at a clean end. Neither W&B nor MLflow can take a row back, so a row sent before its checkpoint
would be doubled after a ``kill -9`` and a resume (the resumed run repeats the updates after the
checkpoint). The lag is at most ``run.checkpoint_every`` updates (``run.eval_every`` checkpoints too).

On a resume the backend first says which updates it holds (W&B's offline writer, for one, may have
lost its last block in the kill) and the checkpointed rows it lacks are sent once.

A tracker never holds training up: the training thread only appends to a list and puts a task on a
queue without waiting. A task that raises (server down, unreachable, refused) gives one warning line
and ends the tracker for this run; a full queue (a tracker far behind) does the same. Closing waits
while the tracker makes progress, and gives up once ``timeout`` seconds pass without a finished task.
Opening (creating or finding the tracker's run) is waited for before training starts, at most ``timeout``
seconds, so that a run killed early already has its tracker run; that wait is the tracker's start-up cost.
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

from shell.errors import first_line, said
from shell.tracking.base import FINISHED, Logger, RunEnd, RunStart, numeric, warn

QUEUE_SIZE = 256  # tasks (one per checkpoint, plus opening and finishing)


class TrackerBackend:
    """One tracker's client, called only from its :class:`QueuedTracker`'s thread, in this order:
    :meth:`open` once, :meth:`send` any number of times, :meth:`finish` once (unless a call raised).
    Any exception ends the tracker for the run (one warning line)."""

    name = "tracker"

    def open(self, start: RunStart) -> set[int]:
        """Create the tracker's run, or continue the one whose id the run dir holds (a resume).

        Returns:
            The updates the tracker already holds (empty for a new run).
        """
        raise NotImplementedError

    def send(self, rows: list[dict[str, float]]) -> None:
        """Record these rows (numbers only, see :func:`shell.tracking.base.numeric`), in update order."""
        raise NotImplementedError

    def finish(self, end: RunEnd) -> None:
        """Record the summary and the run's files; end the tracker's run with ``end.status``."""
        raise NotImplementedError

    def close(self) -> None:
        """Release what :meth:`open` acquired (also called after a failure; must not raise)."""


class QueuedTracker(Logger):
    """A :class:`Logger` that feeds a :class:`TrackerBackend` on a daemon thread (see the module docstring)."""

    def __init__(self, backend: TrackerBackend, start: RunStart):
        self.name = backend.name
        self.backend = backend
        self.timeout = start.timeout
        self._pending: list[dict[str, float]] = []  # rows not yet covered by a checkpoint
        self._queue: queue.Queue[Callable[[], None] | None] = queue.Queue(QUEUE_SIZE)
        self._failed = threading.Event()
        self._opened = threading.Event()
        self._progress = time.monotonic()
        self._thread = threading.Thread(target=self._work, name=f"ppo-core-{backend.name}", daemon=True)
        self._submit(lambda: self._open(start))
        self._thread.start()

    # ---------------------------------------------------------------- the tracker's thread
    def _open(self, start: RunStart) -> None:
        held = self.backend.open(start)
        self._opened.set()
        missing = [dict(r) for r in start.done_rows if int(r["update"]) not in held]
        if missing:
            self.backend.send(missing)

    def _work(self) -> None:
        while True:
            task = self._queue.get()
            if task is None:
                break
            if self._failed.is_set():
                continue
            try:
                task()
            except Exception as exc:
                self._fail(f"{self.name}: {first_line(exc, with_type=True)}")
            self._progress = time.monotonic()
        try:
            self.backend.close()
        except Exception:
            pass

    def _fail(self, why: str) -> None:
        if not self._failed.is_set():
            self._failed.set()
            warn(f"{why}; the run goes on without {self.name} (metrics.csv is complete; {said('resume')} sends the "
                 "checkpointed rows it lacks)")

    # ---------------------------------------------------------------- the training thread
    def _submit(self, task: Callable[[], None] | None) -> None:
        if self._failed.is_set() and task is not None:
            return
        try:
            self._queue.put_nowait(task)
        except queue.Full:
            self._fail(f"{self.name} is {QUEUE_SIZE} tasks behind")

    def wait_open(self, deadline: float) -> bool:
        """Wait until the tracker's run exists (or it failed), at most until ``time.monotonic()`` reaches
        ``deadline``; True if it is open. A tracker still opening then goes on opening in the background."""
        while not (self._opened.is_set() or self._failed.is_set()):
            if self._opened.wait(min(0.05, max(0.0, deadline - time.monotonic()))):
                break
            if time.monotonic() >= deadline or not self._thread.is_alive():
                break
        return self._opened.is_set()

    @property
    def failed(self) -> bool:
        """True once the tracker gave up for this run (its warning line was printed)."""
        return self._failed.is_set()

    def log(self, row: Mapping[str, Any]) -> None:
        self._pending.append(numeric(row))

    def checkpointed(self, update: int) -> None:
        ready = [r for r in self._pending if r["update"] <= update]
        self._pending = [r for r in self._pending if r["update"] > update]
        if ready:
            self._submit(lambda: self.backend.send(ready))

    def finish(self, end: RunEnd) -> None:
        if end.status == FINISHED:  # a clean end: every row (the final checkpoint covers them all)
            self.checkpointed(max((int(r["update"]) for r in self._pending), default=0))
        self._submit(lambda: self.backend.finish(end))

    def close(self) -> None:
        """Let the thread finish its queue; wait while tasks keep finishing, at most ``timeout`` seconds
        without one (then warn and leave the daemon thread behind)."""
        self._progress = time.monotonic()
        try:
            self._queue.put(None, timeout=self.timeout)
        except queue.Full:
            pass
        while self._thread.is_alive():
            self._thread.join(min(0.1, self.timeout))
            if self._thread.is_alive() and time.monotonic() - self._progress > self.timeout:
                self._fail(f"{self.name} made no progress for {self.timeout:g} s at the end")
                return
