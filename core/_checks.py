"""Shape and value checks shared by the core functions.

They raise ``ValueError`` with a one-line message naming the offending shapes
or values, so that silent broadcasting (the classic ``[B]`` against ``[B, 1]``
bug) never reaches the maths.
"""

from __future__ import annotations

import numbers
from typing import Any

import torch


def check_same_shape(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every named tensor has the same shape."""
    shapes = {name: tuple(getattr(t, "shape", ())) for name, t in tensors.items()}  # a Python float: ()
    # compared with the first, not hashed into a set: under torch.compile hashing a symbolic size fixes it to its
    # value (a graph per minibatch size where the rows vary), comparing keeps it symbolic
    first = next(iter(shapes.values()), None)
    if any(s != first for s in shapes.values()):
        listed = ", ".join(f"{name} {list(s)}" for name, s in shapes.items())
        raise ValueError(f"shape mismatch: {listed}; these must all have the same shape")


def check_floating(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every named tensor is floating point."""
    for name, t in tensors.items():
        if not t.is_floating_point():
            raise ValueError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")


def check_moments(**values: Any) -> None:
    """Raise ``ValueError`` unless the named statistics are all floating-point tensors, or all float host values:
    NumPy float arrays or scalars (a float ``dtype.kind``) or Python floats."""
    tensors = [isinstance(v, torch.Tensor) for v in values.values()]
    if all(tensors):
        check_floating(**values)
        return
    if any(tensors):
        kinds = ", ".join(f"{name} {type(v).__name__}" for name, v in values.items())
        raise ValueError(f"statistics must be all tensors or all host values, got {kinds}")
    for name, v in values.items():
        if not isinstance(v, float) and getattr(getattr(v, "dtype", None), "kind", None) != "f":
            raise ValueError(f"{name} must be a float array or number, got {type(v).__name__} "
                             f"{getattr(v, 'dtype', '')}".rstrip())


def check_counts(tensor_moments: bool, **counts: Any) -> None:
    """Raise ``ValueError`` unless every named count is a number >= 0 (NumPy's too), or, beside tensor statistics
    (``tensor_moments``), a floating-point tensor (an integer one would divide in float32)."""
    for name, n in counts.items():
        if type(n) is float or type(n) is int:  # the per-step case first: a plain number
            if n < 0:
                raise ValueError(f"{name} must be >= 0, got {n}")
        elif isinstance(n, torch.Tensor):
            if not tensor_moments:
                raise ValueError(f"{name} is a tensor but the statistics are host values; give it as a number")
            if not n.is_floating_point():
                raise ValueError(f"{name} must be a floating-point tensor, got dtype {n.dtype}")
        elif not isinstance(n, numbers.Real) or isinstance(n, bool):
            raise ValueError(f"{name} must be a tensor or a number, got {type(n).__name__}")
        elif n < 0:
            raise ValueError(f"{name} must be >= 0, got {n}")


def check_same_dtype(**tensors: torch.Tensor) -> None:
    """Raise ``ValueError`` unless every named tensor has the same dtype."""
    dtypes = {name: t.dtype for name, t in tensors.items()}
    if len(set(dtypes.values())) > 1:
        listed = ", ".join(f"{name} {d}" for name, d in dtypes.items())
        raise ValueError(f"dtype mismatch: {listed}; these must share one floating dtype")


def check_unit_interval(**values: float) -> None:
    """Raise ``ValueError`` unless every named number lies in [0, 1]."""
    for name, v in values.items():
        if not 0.0 <= float(v) <= 1.0:
            raise ValueError(f"{name} must lie in [0, 1], got {v}")


def check_flag(name: str, flag: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``flag`` is bool or floating point."""
    if flag.dtype != torch.bool and not flag.is_floating_point():
        raise ValueError(f"{name} must be a bool or floating-point tensor, got dtype {flag.dtype}")


def broadcast_to_last(name: str, value: torch.Tensor, target: torch.Tensor) -> None:
    """Raise ``ValueError`` unless ``value`` broadcasts to ``target.shape`` without growing it."""
    vshape, tshape = value.shape, target.shape
    ok = len(vshape) <= len(tshape) and all(
        v == 1 or v == t for v, t in zip(reversed(vshape), reversed(tshape), strict=False)
    )
    if not ok:
        raise ValueError(
            f"{name} of shape {list(vshape)} does not broadcast to raw_action's shape {list(tshape)}"
        )
