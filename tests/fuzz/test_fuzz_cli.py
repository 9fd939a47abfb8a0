"""A few generated cases through ``main.py`` as a user runs it: train, then ``eval`` and ``export`` of what
trained; a broken config file. The exit code, the last line of stderr, and never a traceback
(tests/fuzz/outcomes.py). Subprocesses are slow to start, so CI runs few of these; the in-process tests
(test_fuzz_envs.py, test_fuzz_configs.py) cover the same cases through ``shell.train``, which ``main.py`` calls.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.expect import allowed
from tests.fuzz.outcomes import (
    PREFIX,
    TALLY,
    as_toml,
    check_failure,
    check_line,
    cli_outcome,
    fuzz_overrides,
    run_cli,
)
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings
from tests.fuzz.strategies import broken_config, env_spec, run_overrides


@fuzz_settings(ci=3, long=200)
@given(spec=env_spec(), run=run_overrides(recurrent=False), export=st.sampled_from(["pt2", "onnx"]))
def test_a_generated_env_through_main_py(spec, run, export):
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config, run_dir = tmp / "fuzz.toml", tmp / "run"
        config.write_text(as_toml(fuzz_overrides(spec, run)))
        proc = run_cli(["--config", str(config), "--run-dir", str(run_dir)], tmp, CASE_SECONDS)
        outcome = cli_outcome(proc)
        TALLY["generated env, main.py", outcome.code] += 1
        codes = allowed(spec, run, "auto")
        assert outcome.code in codes, f"exit {outcome.code} ({outcome.message!r}); allowed: {sorted(codes)}"
        if outcome.code == 2:
            check_line(outcome)
        elif outcome.code == 1:
            check_failure(outcome, run_dir)
        else:
            assert outcome.result["env_steps"] == run["run.total_timesteps"]
            evaluated = cli_outcome(run_cli(["eval", str(run_dir), "--episodes", "1"], tmp, CASE_SECONDS))
            assert evaluated.code == 0 and math.isfinite(evaluated.result["eval_return_mean"]), evaluated
            exported = cli_outcome(run_cli(["export", str(run_dir), "--format", export], tmp, CASE_SECONDS))
            assert exported.code == 0, exported
            assert Path(exported.result["export"]).is_file()


@fuzz_settings(ci=2, long=200)
@given(case=broken_config())
def test_a_broken_config_file_through_main_py(case):
    what, overrides = case
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        config = tmp / "broken.toml"
        config.write_text(as_toml({"env.id": "CartPole-v1", **overrides}))
        proc = run_cli(["--config", str(config), "--run-dir", str(tmp / "run")], tmp, CASE_SECONDS)
        outcome = cli_outcome(proc)
        TALLY["broken config, main.py", outcome.code] += 1
        assert outcome.code == 2, f"{what}: exit {outcome.code}"
        check_line(outcome)
        assert proc.stderr.strip().splitlines() == [PREFIX + outcome.message], proc.stderr  # nothing else
        assert not (tmp / "run").exists()
