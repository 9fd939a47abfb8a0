"""Generated gymnasium envs through ``shell.train``, ``load_policy``, ``eval`` and export (tests/fuzz/outcomes.py).

Each case is an env spec (tests/fuzz/strategies.py: observation and action spaces, episode ends, reward and
observation scales, a mask convention, now and then a fault) and a tiny config of one or two updates. What the
library documents as unsupported must be refused at start-up (exit 2, one short line); an env's own fault may
end training (exit 1, one line, the last checkpoint kept); everything else must train, with finite metrics and
checkpoints, and a policy whose every action is in its space and legal under its mask.
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

import shell
from shell.evaluation import eval_checkpoint
from tests.fuzz.expect import allowed
from tests.fuzz.outcomes import (
    TALLY,
    act_in_env,
    check_checkpoints_finite,
    check_exit,
    check_export,
    check_metrics_finite,
    classify,
    fuzz_overrides,
    make_fuzz_env,
)
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings
from tests.fuzz.strategies import env_spec, maskable, run_overrides


def check_success(run_dir: Path, summary: dict[str, Any], spec: dict[str, Any], mask_setting: str,
                  export: str | None, evaluate: bool) -> None:
    check_metrics_finite(run_dir, summary)
    check_checkpoints_finite(run_dir)
    policy = shell.load_policy(run_dir)
    clean = {**spec, "fault": None, "enforce_mask": mask_setting != "none"}
    act_in_env(policy, make_fuzz_env(clean))
    if evaluate:
        result = eval_checkpoint(run_dir, episodes=1)
        assert math.isfinite(result["eval_return_mean"]), result
    if export is not None:
        check_export(run_dir, export)


@fuzz_settings(ci=36, long=2500)
@given(spec=env_spec(), run=run_overrides(), data=st.data())
def test_a_generated_env_trains_or_is_refused_in_one_line(spec, run, data):
    options = ["auto", "auto", "none"] + ([spec["mask"]] if spec["mask"] else []) + \
        (["info", "obs", "method"] if maskable(spec["act"]) else [])
    mask_setting = data.draw(st.sampled_from(options), label="env.action_mask")
    if mask_setting == "none":
        spec = {**spec, "enforce_mask": False}
    export = data.draw(st.sampled_from([None] * 6 + ["pt2", "onnx"]), label="export")
    evaluate = data.draw(st.booleans(), label="eval")
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        overrides = fuzz_overrides(spec, run, mask_setting)
        outcome = classify(lambda: shell.train(overrides=overrides, run_dir=run_dir, progress=False),
                           CASE_SECONDS, "the case")
        TALLY["generated env", outcome.code] += 1
        if check_exit(outcome, allowed(spec, run, mask_setting), run_dir):
            check_success(run_dir, outcome.result.summary, spec, mask_setting, export, evaluate)
