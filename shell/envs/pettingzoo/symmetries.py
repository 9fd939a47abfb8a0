"""Symmetries of PettingZoo's classic games, for ``ppo.symmetry`` (symmetry augmentation of the update's
minibatches; :meth:`shell.ppo.PPO._mirrored`).

A symmetry function takes a minibatch as the update holds it and returns its mirror image, batched and on the
device, the same shapes and dtypes it was given:

- ``obs``: the observations the policy reads, ``[B, ...]`` (a dict of them for a Dict observation, without its
  ``action_mask`` key);
- ``raw_actions``: the stored actions, ``[B]`` long for a Discrete space;
- ``action_mask``: ``[B, A]`` bool, or None for a game without masks.

The image must be a move of the same game: the mirrored move in the mirrored position, legal exactly where the
original was, worth what the original was worth (the update keeps its advantage). A game of more than one symmetry
takes a keyword ``generator`` too (the run's ``torch.Generator``, on the batch's device) and draws each row's image
from it, so that a run repeats itself and a resume goes on exactly.

- :func:`connect_four_mirror`: connect four seen in a mirror, column ``c`` as column ``6 - c``.
- :func:`tictactoe_dihedral`: tic-tac-toe turned or reflected: each row one of the square's seven symmetries other
  than the identity, at random.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["connect_four_mirror", "tictactoe_dihedral"]

ROWS, COLUMNS, PLANES = 6, 7, 2


def _dihedral_sources() -> torch.Tensor:
    """``[8, 9]`` long: row ``g`` holds, for each square ``3 i + j`` of the image under the square's symmetry ``g``,
    the square of the original board it shows (``g`` 0 the identity, 1-3 the quarter turns, 4-7 the reflections)."""
    maps = [lambda i, j: (i, j), lambda i, j: (j, 2 - i), lambda i, j: (2 - i, 2 - j), lambda i, j: (2 - j, i),
            lambda i, j: (i, 2 - j), lambda i, j: (2 - i, j), lambda i, j: (j, i), lambda i, j: (2 - j, 2 - i)]
    sources = torch.empty(8, 9, dtype=torch.long)
    for g, move in enumerate(maps):  # the square (i, j) moves to move(i, j): the image's square there shows it
        for i in range(3):
            for j in range(3):
                a, b = move(i, j)
                sources[g, 3 * a + b] = 3 * i + j
    return sources


#: ``[8, 9]``: the original square each image square shows, per symmetry (:func:`_dihedral_sources`)
DIHEDRAL_SOURCES = _dihedral_sources()
#: ``[8, 9]``: where each original square goes, per symmetry (the inverse permutations)
DIHEDRAL_TARGETS = DIHEDRAL_SOURCES.argsort(dim=1)


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


def tictactoe_dihedral(obs: Any, raw_actions: torch.Tensor, action_mask: torch.Tensor | None, *,
                       generator: torch.Generator) -> tuple[Any, torch.Tensor, torch.Tensor | None]:
    """Tic-tac-toe turned a quarter, a half or three quarters, or reflected in one of its four axes: each row's
    symmetry is one of these seven, uniform from ``generator`` (the identity is the update's other half). A line,
    a threat, a fork or a legal square stays one; square ``s`` of the move becomes the square it moves to.

    Args:
        obs: ``[B, 3, 3, 2]`` planes (square ``3 i + j`` at ``[i, j]``, plane 0 the mover's) or the same flattened
            ``[B, 18]``, any dtype; bare or in a dict under ``"observation"``.
        raw_actions: ``[B]`` long, the squares played (0-8).
        action_mask: ``[B, 9]`` bool, the empty squares (or None).
        generator: the run's ``torch.Generator`` on the batch's device: one draw ``[B]``.

    Returns:
        ``(obs, raw_actions, action_mask)`` turned or reflected, in the layout, shapes and dtypes given.

    Raises:
        ValueError: ``obs`` is not tic-tac-toe's 18 numbers per row.
    """
    planes = obs["observation"] if isinstance(obs, dict) else obs
    if planes.shape[1:] not in ((3, 3, PLANES), (9 * PLANES,)):
        raise ValueError(f"tictactoe_dihedral needs tic-tac-toe's planes [B, 3, 3, 2] or [B, 18], got "
                         f"{list(planes.shape)}")
    device = raw_actions.device
    g = torch.randint(1, 8, (len(raw_actions),), generator=generator, device=device)
    sources = DIHEDRAL_SOURCES.to(device)[g]  # [B, 9]
    squares = planes.reshape(-1, 9, PLANES)
    turned = squares.gather(1, sources.unsqueeze(-1).expand(-1, -1, PLANES)).reshape(planes.shape)
    if isinstance(obs, dict):
        turned = {**obs, "observation": turned}
    actions = DIHEDRAL_TARGETS.to(device)[g].gather(1, raw_actions.view(-1, 1)).view(raw_actions.shape)
    mask = None if action_mask is None else action_mask.gather(1, sources)
    return turned, actions, mask
