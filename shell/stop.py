"""Stop requests: how a signal caught by the CLI (or a stop asked for from Python) reaches the loop.

Library code never installs signal handlers. ``main.py`` installs them and turns the first
SIGINT/SIGTERM into ``StopRequest.request``; the runner, the evaluation and every long wait
poll the request (at least once per env step and once per minibatch, so within about a
second) and raise :class:`Interrupted`, which the runner answers with a checkpoint and a
summary marked ``interrupted``.
"""

from __future__ import annotations

import signal


class Interrupted(Exception):
    """A stop request was honoured; ``signum`` is the signal behind it (exit code ``128 + signum``)."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class StopRequest:
    """A flag set from outside the loop (a signal handler, a callback, another thread) and polled inside it.

    The first request wins: later ones do not change ``signum``.
    """

    def __init__(self) -> None:
        self.signum: int | None = None

    def request(self, signum: int = signal.SIGTERM) -> None:
        """Ask the run to stop at its next poll, as if ``signum`` (default SIGTERM) had arrived."""
        if self.signum is None:
            self.signum = int(signum)

    @property
    def requested(self) -> bool:
        return self.signum is not None

    def check(self) -> None:
        """Raise :class:`Interrupted` if a stop was requested."""
        if self.signum is not None:
            raise Interrupted(self.signum)


def exit_code(signum: int) -> int:
    """The shell's exit status for a run stopped by ``signum``: 130 for SIGINT, 143 for SIGTERM."""
    return 128 + int(signum)
