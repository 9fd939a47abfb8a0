"""Regression tests of the bugs the fuzzer found (docs/reliability.md lists them), each named after the bug."""

from __future__ import annotations

import math

import pytest

from shell.config import apply_overrides, load_config
from shell.errors import ConfigError


@pytest.mark.parametrize("key", ["ppo.gamma", "ppo.gae_lambda", "ppo.learning_rate", "ppo.clip_coef", "ppo.vf_coef",
                                 "ppo.ent_coef", "ppo.max_grad_norm", "ppo.adam_eps", "ppo.target_kl",
                                 "ppo.reward_scale", "env.obs_clip", "env.reward_clip", "policy.init_log_std",
                                 "policy.image_scale", "run.tracker_timeout", "selfplay.latest_prob"])
@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf])
def test_a_non_finite_float_in_a_config_is_refused_at_start_up(key, value):
    """NaN passed every range check (each comparison with NaN is false) and inf passed those without an upper
    bound, so ``ppo.gamma = nan`` or ``ppo.learning_rate = inf`` trained, to exit 1 on a non-finite loss or to
    silently useless updates, instead of exit 2 at start-up."""
    written = "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    for load in (lambda: apply_overrides({}, {key: value}), lambda: load_config(None, [f"{key}={written}"])):
        with pytest.raises(ConfigError) as info:
            load()
        assert f"{key} = {value!r} is not a finite number; allowed: " in str(info.value)
        assert "\n" not in str(info.value)

