"""Data-parallel training with torch.distributed, launched by ``torchrun``.

Each rank runs its own envs and rollout; gradients are averaged with one ``all_reduce``
per minibatch, so every rank holds identical parameters after every optimiser step.
Without ``torchrun`` (no ``WORLD_SIZE`` in the environment) everything here is a no-op.

When another rank ends in the middle of a run (its process, or its whole node, killed or gone), the next
collective fails at once on the others (gloo and nccl see the closed connection): it raises :class:`RankLost`,
a :class:`~shell.errors.TrainingError`, and :func:`shutdown` then leaves the group without its barrier.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import TypeVar

import attrs
import torch
import torch.distributed as dist

from shell.errors import TrainingError

T = TypeVar("T")

# what gloo, nccl and the c10d store say when the other end of a connection is gone
_LOST = ("closed by peer", "connection reset", "broken pipe", "timed out", "timeout", "connection refused",
         "socket", "recvbytes", "sendbytes")
_lost = False


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
