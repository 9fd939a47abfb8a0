"""The fuzzer's Hypothesis profiles: ``ci`` (fixed and derandomised) and ``long`` (PPO_FUZZ_PROFILE=long)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILE = os.environ.get("PPO_FUZZ_PROFILE", "ci")
if PROFILE not in ("ci", "long"):
    raise ValueError(f"PPO_FUZZ_PROFILE={PROFILE!r}: choose 'ci' or 'long'")
LONG = PROFILE == "long"
#: Seconds one case may take before it counts as a hang (a few updates, an evaluation and an export).
CASE_SECONDS = 240.0 if LONG else 120.0

_COMMON = {"deadline": None, "print_blob": True, "database": None,
           "suppress_health_check": [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
                                     HealthCheck.function_scoped_fixture]}
settings.register_profile("fuzz-ci", derandomize=True, **_COMMON)
settings.register_profile("fuzz-long", derandomize=False, **_COMMON)


def fuzz_settings(ci: int, long: int) -> settings:
    """The profile's settings with ``ci`` or ``long`` examples (``PPO_FUZZ_EXAMPLES`` scales the long ones;
    ``PPO_FUZZ_SHRINK=0`` reports a failure as found, without shrinking it)."""
    examples = round(long * float(os.environ.get("PPO_FUZZ_EXAMPLES", "1"))) if LONG else ci
    phases = [p for p in Phase if p is not Phase.shrink or os.environ.get("PPO_FUZZ_SHRINK", "1") != "0"]
    return settings(settings.get_profile(f"fuzz-{PROFILE}"), max_examples=max(1, examples), phases=phases)
