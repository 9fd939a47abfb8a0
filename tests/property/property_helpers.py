"""Strategies and assertions shared by the property tests of ``core``.

Floats are drawn as float32 values (``width=32``), so a float32 tensor and the
float64 reference see exactly the same numbers; the reference then computes in
Python floats (float64). Tolerances are written as error bounds: a few units of
``eps(dtype)`` times the size of the terms that are summed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

DTYPES = (torch.float32, torch.float64)
dtypes = st.sampled_from(DTYPES)

# gamma and lam: the closed unit interval, with its ends drawn often.
unit_interval = st.one_of(st.sampled_from([0.0, 1.0]), st.floats(0.0, 1.0))


def finite_floats(bound: float, *, min_value: float | None = None) -> st.SearchStrategy[float]:
    """Finite float32-representable floats in ``[-bound, bound]`` (or ``[min_value, bound]``)."""
    lo = float(np.float32(-bound if min_value is None else min_value))
    hi = float(np.float32(bound))
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False, allow_subnormal=False, width=32)


def arrays(shape: int | tuple[int, ...], bound: float = 10.0, *, min_value: float | None = None):
    """float32 numpy arrays of the given shape with finite bounded elements."""
    return hnp.arrays(np.float32, shape, elements=finite_floats(bound, min_value=min_value))


def as_tensor(array: Any, dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``dtype`` holding exactly the (float32-representable) values of ``array``."""
    return torch.as_tensor(np.asarray(array, dtype=np.float64)).to(dtype)


def eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps


def call_pure(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """Call ``fn`` and assert it wrote to none of its tensor arguments (core is pure)."""
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    copies = [t.detach().clone() for t in tensors]
    out = fn(*args, **kwargs)
    for t, copy in zip(tensors, copies, strict=True):
        torch.testing.assert_close(t.detach(), copy, rtol=0, atol=0, equal_nan=True, msg="core wrote to an input")
    return out


def assert_meta(out: torch.Tensor, like: torch.Tensor, shape: tuple[int, ...] | torch.Size) -> None:
    """``out`` has the expected shape and the dtype and device of ``like``."""
    assert isinstance(out, torch.Tensor)
    assert tuple(out.shape) == tuple(shape), (tuple(out.shape), tuple(shape))
    assert out.dtype == like.dtype, (out.dtype, like.dtype)
    assert out.device == like.device, (out.device, like.device)


def assert_close(actual: torch.Tensor, expected: Any, *, atol: Any, rtol: float = 0.0) -> None:
    """Compare ``actual`` with a float64 reference; ``atol`` may be a per-element array.

    An absolute floor of a few ``finfo(dtype).tiny`` is always allowed: below the normal range
    (subnormals) floats keep absolute, not relative, precision.
    """
    floor = 4 * torch.finfo(actual.dtype).tiny
    actual64 = actual.detach().to(torch.float64).cpu()
    expected64 = torch.as_tensor(np.asarray(expected, dtype=np.float64))
    atol64 = torch.as_tensor(np.array(atol, dtype=np.float64))
    assert actual64.shape == expected64.shape, (actual64.shape, expected64.shape)
    assert torch.isfinite(actual64).all(), actual64
    error = (actual64 - expected64).abs()
    bound = atol64 + rtol * expected64.abs() + floor
    bad = error > bound
    if bad.any():
        raise AssertionError(
            f"mismatch against the float64 reference at {bad.nonzero().tolist()[:5]}: "
            f"actual {actual64[bad].tolist()[:5]}, expected {expected64[bad].tolist()[:5]}, "
            f"error {error[bad].tolist()[:5]} > bound {bound.expand_as(error)[bad].tolist()[:5]}"
        )
