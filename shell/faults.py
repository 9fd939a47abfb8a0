"""A test-only fault-injection hook: SIGKILL this process at a named phase of a named update.

Set ``PPO_CORE_KILL_AT=PHASE:UPDATE`` in the environment of a training process, with PHASE one of
``rollout`` (half-way through the rollout of update UPDATE), ``update`` (after the first minibatch
of update UPDATE), ``checkpoint`` (inside the checkpoint write after update UPDATE: the temporary
file is written and fsynced, the rename has not happened) or ``eval`` (during the evaluation after
update UPDATE: a periodic one, or the final one after the last update). The process then dies as
under ``kill -9``: no handler, no flush, no cleanup. ``tests/integration/test_fault_injection.py``
resumes such runs and checks what is on disk. Unset (the normal case), every call is one
comparison of a string with ``None``.
"""

from __future__ import annotations

import os
import signal

_KILL_AT = os.environ.get("PPO_CORE_KILL_AT")


def kill_point(phase: str, update: int) -> None:
    """SIGKILL this process if ``PPO_CORE_KILL_AT`` names ``phase:update``."""
    if _KILL_AT is not None and _KILL_AT == f"{phase}:{update}":
        os.kill(os.getpid(), signal.SIGKILL)
