"""Generated configs: valid ones across the schema are accepted, round-trip through TOML and train; broken ones
(wrong types, ranges, unknown keys, bad combinations) are refused with one line, through every way a config
comes in (a mapping of overrides, ``--set`` strings, a TOML file) and by ``shell.train`` before anything starts.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

import shell
from shell.config import apply_overrides, dump_toml, load_config
from shell.errors import ConfigError
from tests.fuzz.outcomes import TALLY, Outcome, as_set_strings, as_toml, check_line, classify, fuzz_overrides
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings
from tests.fuzz.strategies import broken_config, valid_config

#: Envs a valid config trains on: a Box action (Pendulum), a Discrete one (CartPole), and a generated env of a
#: Dict observation (vector, Discrete and image keys) and a masked MultiDiscrete action.
DICT_ENV = {"obs": {"type": "dict", "spaces": {
    "pos": {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0},
    "cell": {"type": "discrete", "n": 4, "start": 1},
    "image": {"type": "box", "shape": [8, 8, 3], "dtype": "uint8", "low": 0, "high": 255}}},
    "act": {"type": "multidiscrete", "nvec": [3, 2], "start": [0, -1]}, "episodes": [[7, "terminated"],
                                                                                    [12, "truncated"]],
    "reward_scale": 1.0, "obs_scale": 1.0, "mask": "info", "one_legal": 0.5, "fault": None, "seed": 0}


def train_refused(what: str, overrides: dict) -> Outcome:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        outcome = classify(lambda: shell.train(env="CartPole-v1", overrides=overrides, run_dir=run_dir,
                                               progress=False), CASE_SECONDS, what)
        assert not run_dir.exists(), f"{what}: a refused run left {run_dir} behind"
    return outcome


@fuzz_settings(ci=120, long=5000)
@given(overrides=valid_config())
def test_a_valid_config_is_accepted_the_same_three_ways_and_round_trips(overrides):
    config = apply_overrides({}, overrides)
    assert load_config(None, as_set_strings(overrides)) == config
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(as_toml(overrides))
        assert load_config(str(path)) == config
        path.write_text(dump_toml(config))  # the run dir's config.toml
        assert load_config(str(path)) == config


@fuzz_settings(ci=150, long=5000)
@given(case=broken_config())
def test_a_broken_config_is_refused_in_one_line_every_way(case):
    what, overrides = case
    outcomes = []
    for load in (lambda: apply_overrides({}, overrides), lambda: load_config(None, as_set_strings(overrides))):
        try:
            load()
        except ConfigError as exc:
            outcomes.append(Outcome(2, str(exc)))
        else:  # a rule that needs the env: shell.train must refuse it before anything starts
            outcomes.append(train_refused(what, overrides))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "c.toml"
        path.write_text(as_toml(overrides))
        try:
            load_config(str(path))
        except ConfigError as exc:
            outcomes.append(Outcome(2, str(exc)))
        else:  # as above: shell.train of the file must refuse it
            outcomes.append(train_refused(what, overrides))
    for outcome in outcomes:
        TALLY["broken config", outcome.code] += 1
        assert outcome.code == 2, f"{what}: exit {outcome.code} {outcome.message!r}"
        check_line(outcome)


@fuzz_settings(ci=10, long=1500)
@given(overrides=valid_config(), env=st.sampled_from(["CartPole-v1", "Pendulum-v1", "dict"]))
def test_a_valid_config_trains(overrides, env):
    if env == "dict":
        overrides = fuzz_overrides(DICT_ENV, overrides, "auto")
        source = None
    else:
        source = env
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        outcome = classify(lambda: shell.train(env=source, overrides=overrides, run_dir=run_dir, progress=False),
                           CASE_SECONDS, "the case")
        TALLY["valid config", outcome.code] += 1
        if env == "dict" and overrides.get("policy.cnn") == "nature":  # a documented refusal: 8x8 images
            assert outcome.code == 2 and "policy.cnn = 'nature' needs images of at least 36x36" in outcome.message
            return
        assert outcome.code == 0, outcome.message
        summary = outcome.result.summary
        assert summary["env_steps"] == overrides["run.total_timesteps"]
