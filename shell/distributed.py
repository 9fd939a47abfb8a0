"""Data-parallel training with torch.distributed, launched by ``torchrun``.

Each rank runs its own envs and rollout; gradients are averaged with one ``all_reduce``
per minibatch, so every rank holds identical parameters after every optimiser step.
Without ``torchrun`` (no ``WORLD_SIZE`` in the environment) everything here is a no-op.
"""

from __future__ import annotations

import os

import attrs
import torch
import torch.distributed as dist


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
            dist.all_reduce(tensor, op=dist.ReduceOp.SUM)
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
        dist.all_reduce(flat, op=dist.ReduceOp.SUM)
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
                dist.broadcast(tensor.data, src=0)

    def gather_objects(self, obj: object) -> list[object]:
        """``[obj of rank 0, obj of rank 1, ...]`` on every rank."""
        if not self.enabled:
            return [obj]
        out: list[object] = [None] * self.world_size
        dist.all_gather_object(out, obj)
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
    """Leave the process group: a barrier first, so that no rank tears down while another still talks."""
    if dist.is_initialized():
        dist.barrier()
        dist.destroy_process_group()
