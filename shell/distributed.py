"""Data-parallel training with torch.distributed, launched by ``torchrun``.

Each rank runs its own envs and rollout; gradients are averaged with one ``all_reduce``
per minibatch, so every rank holds identical parameters after every optimiser step.
Without ``torchrun`` (no ``WORLD_SIZE`` in the environment) everything here is a no-op.

When another rank ends in the middle of a run (its process, or its whole node, killed or gone), the next
collective fails at once on the others (gloo and nccl see the closed connection): it raises :class:`RankLost`,
a :class:`~shell.errors.TrainingError`, and :func:`shutdown` then leaves the group without its barrier.

torchrun starts each rank in a session of its own and does not take its ranks with it when it is killed: a rank
whose launcher is gone ends itself (:func:`end_with_launcher`).
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from typing import TypeVar

import attrs
import torch
import torch.distributed as dist

from shell.errors import TrainingError
from shell.workers import WATCH_PERIOD

T = TypeVar("T")

# what gloo, nccl and the c10d store say when the other end of a connection is gone
_LOST = ("closed by peer", "connection reset", "broken pipe", "timed out", "timeout", "connection refused",
         "socket", "recvbytes", "sendbytes")
_lost = False

LAUNCHER_GONE = 129  # the exit code of a rank whose launcher has ended: 128 + SIGHUP, as for a lost terminal
_launcher: int | None = None  # the pid of torchrun's process, once end_with_launcher watches it
SETTLE = 2.0  # seconds a rank that got a signal waits to see whether its launcher is ending with it
_ending = threading.Lock()  # one line only, when the watch and a failed collective find the launcher gone at once


class RankLost(TrainingError):
    """A collective failed because another rank of the group ended: its process, or its whole node."""


def _collective(call: Callable[[], T]) -> T:
    """Run one collective; a failure that says a peer is gone becomes :class:`RankLost`."""
    global _lost
    try:
        return call()
    except RuntimeError as exc:
        text = str(exc)
        if not (isinstance(exc, dist.DistNetworkError) or any(word in text.lower() for word in _LOST)):
            raise
        if _launcher is not None and os.getppid() != _launcher:  # a rank of this node, ended with the launcher
            _launcher_gone()
        _lost = True
        first = re.sub(r"^\[[^\]]*\]\s*", "", text.strip().splitlines()[0] if text.strip() else type(exc).__name__)
        raise RankLost(f"lost a node (or a process) of the torchrun group: {first.split('. ')[0][:200]}") from None


@attrs.frozen
class Dist:
    """Where this process stands: ``rank`` of ``world_size`` (1 without torchrun)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    def all_reduce_sum(self, tensor: torch.Tensor) -> torch.Tensor:
        """Sum ``tensor`` over ranks in place and return it (identity for one process)."""
        if self.enabled:
            _collective(lambda: dist.all_reduce(tensor, op=dist.ReduceOp.SUM))
        return tensor

    def any(self, flag: bool, device: torch.device) -> bool:
        """True on every rank when ``flag`` is true on any (one all_reduce; ``flag`` itself for one process)."""
        if not self.enabled:
            return flag
        return bool(self.all_reduce_sum(torch.tensor([float(flag)], device=device)).item())

    def average_gradients(self, parameters: list[torch.nn.Parameter]) -> None:
        """Replace each gradient by its mean over ranks (one flat all_reduce)."""
        if not self.enabled:
            return
        grads = [p.grad for p in parameters if p.grad is not None]
        flat = torch.cat([g.reshape(-1) for g in grads])
        _collective(lambda: dist.all_reduce(flat, op=dist.ReduceOp.SUM))
        flat /= self.world_size
        offset = 0
        for g in grads:
            n = g.numel()
            g.copy_(flat[offset:offset + n].view_as(g))
            offset += n

    def broadcast_parameters(self, module: torch.nn.Module) -> None:
        """Copy rank 0's parameters and buffers to every rank."""
        if self.enabled:
            for tensor in [*module.parameters(), *module.buffers()]:
                _collective(lambda tensor=tensor: dist.broadcast(tensor.data, src=0))

    def gather_objects(self, obj: object) -> list[object]:
        """``[obj of rank 0, obj of rank 1, ...]`` on every rank."""
        if not self.enabled:
            return [obj]
        out: list[object] = [None] * self.world_size
        _collective(lambda: dist.all_gather_object(out, obj))
        return out


def init_distributed(device_name: str) -> tuple[Dist, str]:
    """Join the process group when launched by torchrun; return ``(Dist, device name)``.

    gloo on CPU, nccl on CUDA (each rank on ``cuda:LOCAL_RANK``).
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return Dist(), device_name
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    use_cuda = device_name == "cuda" or (device_name == "auto" and torch.cuda.is_available())
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if use_cuda else "gloo")
    if use_cuda:
        torch.cuda.set_device(local_rank)
        return Dist(rank, world_size, local_rank), f"cuda:{local_rank}"
    return Dist(rank, world_size, local_rank), "cpu"


def end_with_launcher(launcher_pid: int) -> bool:
    """Under torchrun, end this process within a second of the end of its launcher, ``launcher_pid``.

    torchrun (its elastic agent) starts each rank in a session of its own, so a launcher killed with SIGKILL, or
    its process group, left its ranks training on, re-parented to init. A daemon thread looks at this process's
    parent every :data:`~shell.workers.WATCH_PERIOD` seconds; once it is no longer ``launcher_pid``, the thread
    writes one line on stderr and ends the process with :data:`LAUNCHER_GONE`, at once: nothing more is
    written (a checkpoint being written is left unfinished in its temporary file, never in its place). A rank whose
    collective fails before its thread looks (another rank of its node has ended already) ends the same way, with
    the same line; the ranks of other nodes lose this one at their next collective (:class:`RankLost`).

    The thread, not Linux's ``PR_SET_PDEATHSIG``: it says why, works on every platform, and does not depend on
    which of the launcher's threads started the rank. A no-op outside torchrun (no ``TORCHELASTIC_RUN_ID``).

    Args:
        launcher_pid: ``os.getppid()`` taken as early as possible: the agent, torchrun's process. A launcher
            that is gone already ends this process at the first look.

    Returns:
        Whether the watch was started (under torchrun).
    """
    global _launcher
    if "TORCHELASTIC_RUN_ID" not in os.environ:
        return False
    _launcher = launcher_pid

    def watch() -> None:
        while os.getppid() == launcher_pid:
            time.sleep(WATCH_PERIOD)
        _launcher_gone()

    threading.Thread(target=watch, name="ppo-core-launcher-watch", daemon=True).start()
    return True


def launcher_has_ended() -> bool:
    """Whether this rank runs under torchrun (:func:`end_with_launcher` was called) and its launcher has ended (the
    rank was re-parented). A signal such a rank gets (torch's agent may leave it a parent-death SIGTERM) ends it
    as the watch does, with the launcher's line, and not as a stop request: nothing is written after the launcher
    is gone."""
    return _launcher is not None and os.getppid() != _launcher


def settle_signal() -> None:
    """Called by a rank that got SIGINT/SIGTERM while its launcher still looked alive, before it stops and saves:
    wait up to :data:`SETTLE` seconds, and end as the watch does if the launcher ends in that time.

    A launcher killed with SIGKILL is its ranks' parent until the kernel has torn it down, and a signal can reach
    a rank first (seen in CI under load: the rank stopped, saved a checkpoint and said "interrupted by SIGTERM"
    after its launcher was gone). A stop asked through a live launcher costs these seconds once. A no-op outside
    torchrun.
    """
    if _launcher is None:
        return
    deadline = time.monotonic() + SETTLE
    while True:
        if launcher_has_ended():
            _launcher_gone()
        if time.monotonic() >= deadline:
            return
        time.sleep(0.05)


def end_for_launcher() -> None:
    """End this rank now, saying that its launcher has ended (:func:`end_with_launcher`'s end)."""
    _launcher_gone()


def _launcher_gone() -> None:
    """One line on stderr, then the end of this process (:data:`LAUNCHER_GONE`): its launcher has ended."""
    rank, world_size = os.environ.get("RANK", "0"), os.environ.get("WORLD_SIZE", "1")
    with _ending:  # a second caller waits here for the end
        try:
            print(f"\nerror: the torchrun launcher (pid {_launcher}) has ended, so rank {rank} of {world_size} "
                  "stops here; checkpoints already on disk are kept", file=sys.stderr, flush=True)
        except Exception:  # stderr closed, or a pipe with no reader left
            pass
        os._exit(LAUNCHER_GONE)


def shutdown() -> None:
    """Leave the process group: a barrier first, so that no rank tears down while another still talks.

    After a lost rank (:class:`RankLost`, or a barrier that finds one gone) the group is left as it is: the
    process ends next, and nothing more can be said to the ranks that are gone."""
    if not dist.is_initialized() or _lost:
        return
    try:
        _collective(dist.barrier)
    except RankLost:
        return
    dist.destroy_process_group()
