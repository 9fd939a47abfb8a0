"""Device choice: a config's or a flag's ``"auto" | "cpu" | "cuda"`` -> a ``torch.device``."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from shell.errors import ConfigError

if TYPE_CHECKING:  # shell.distributed sits in this module's layer: only its type is named here
    from shell.distributed import Dist

__all__ = ["resolve_device"]


def resolve_device(name: str, dist: Dist | None = None) -> torch.device:
    """'auto' -> cuda when available, else cpu; under torchrun, CUDA rank r uses cuda:LOCAL_RANK.

    Raises:
        ConfigError: cuda without a GPU.
    """
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise ConfigError("run.device = 'cuda' but torch sees no CUDA device; use 'cpu' or 'auto'")
    if name == "cuda" and dist is not None and dist.enabled:
        return torch.device("cuda", dist.local_rank)
    return torch.device(name)
