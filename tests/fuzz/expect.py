"""Which exit codes a generated gymnasium env case may end with (tests/fuzz/outcomes.py checks each)."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.fuzz.strategies import refusals

#: Rewards or observations this large may overflow float32 in the losses: exit 1 naming the non-finite value is
#: then allowed (the env's scale, not a bug), as it is in any float32 PPO.
EXTREME = 1e6


def magnitude(spec: dict[str, Any]) -> float:
    """The largest |value| a spec's observations hold (Box parts: the centre of the bounds plus the scale)."""
    def walk(space: dict[str, Any]) -> float:
        if space["type"] in ("dict", "tuple"):
            subs = space["spaces"].values() if space["type"] == "dict" else space["spaces"]
            return max((walk(s) for s in subs), default=0.0)
        if space["type"] != "box" or space["dtype"] == "bool":
            return 0.0
        dtype = np.dtype(space["dtype"])
        low = np.asarray(space["low"], np.float64).astype(dtype).astype(np.float64)
        high = np.asarray(space["high"], np.float64).astype(dtype).astype(np.float64)
        centre = np.clip(0.0, low, high)
        far = np.maximum(np.abs(np.maximum(low, centre - spec["obs_scale"])),
                         np.abs(np.minimum(high, centre + spec["obs_scale"])))
        return float(np.max(far))
    return walk(spec["obs"])


def allowed(spec: dict[str, Any], run: dict[str, Any], mask_setting: str) -> set[int]:
    """The exit codes a case may end with."""
    mismatch = mask_setting not in ("auto", "none", spec["mask"])
    if refusals(spec) or mismatch:
        return {2}
    fault = spec["fault"]
    if fault is not None:
        return {0, 1, 2} if fault["at"] == 0 else {0, 1}
    if max(spec["reward_scale"], magnitude(spec)) >= EXTREME:
        return {0, 1}
    return {0}
