"""Symmetries of PettingZoo's classic games, for ``ppo.symmetry`` (symmetry augmentation of the update's
minibatches; :meth:`shell.ppo.PPO._mirrored`).

A symmetry function takes a minibatch as the update holds it and returns its mirror image, batched and on the
device, the same shapes and dtypes it was given:

- ``obs``: the observations the policy reads, ``[B, ...]`` (a dict of them for a Dict observation, without its
  ``action_mask`` key);
- ``raw_actions``: the stored actions, ``[B]`` long for a Discrete space;
- ``action_mask``: ``[B, A]`` bool, or None for a game without masks.

The image must be a move of the same game: the mirrored move in the mirrored position, legal exactly where the
original was, worth what the original was worth (the update keeps its advantage).

- :func:`connect_four_mirror`: connect four seen in a mirror, column ``c`` as column ``6 - c``.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["connect_four_mirror"]

ROWS, COLUMNS, PLANES = 6, 7, 2


def connect_four_mirror(obs: Any, raw_actions: torch.Tensor,
                        action_mask: torch.Tensor | None) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
    """Connect four left to right: every column ``c`` becomes column ``6 - c`` (a win, a threat or a legal move
    stays one, the same distance from the centre).

    Args:
        obs: ``[B, 6, 7, 2]`` planes (row 0 the top, plane 0 the mover's pieces) or the same flattened ``[B, 84]``,
            any dtype; bare or in a dict under ``"observation"``.
        raw_actions: ``[B]`` long, the columns played.
        action_mask: ``[B, 7]`` bool, the columns with room left (or None).

    Returns:
        ``(obs, raw_actions, action_mask)`` mirrored, in the layout, shapes and dtypes given.

    Raises:
        ValueError: ``obs`` is not connect four's 84 numbers per row.
    """
    planes = obs["observation"] if isinstance(obs, dict) else obs
    if planes.shape[1:] not in ((ROWS, COLUMNS, PLANES), (ROWS * COLUMNS * PLANES,)):
        raise ValueError(f"connect_four_mirror needs connect four's planes [B, 6, 7, 2] or [B, 84], got "
                         f"{list(planes.shape)}")
    mirrored = planes.reshape(-1, ROWS, COLUMNS, PLANES).flip(2).reshape(planes.shape)
    if isinstance(obs, dict):
        mirrored = {**obs, "observation": mirrored}
    mask = None if action_mask is None else action_mask.flip(-1)
    return mirrored, COLUMNS - 1 - raw_actions, mask
