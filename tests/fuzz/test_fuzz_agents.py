"""Generated PettingZoo Parallel envs, whose agents join late and leave early, through ``shell.train``,
``load_policy`` (an ``AgentsPolicy``) and export (tests/fuzz/fuzz_agents.py, tests/fuzz/outcomes.py)."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

import shell
from shell.export import export_lanes
from tests.fuzz.fuzz_agents import MASK_KEY, FuzzAgents
from tests.fuzz.outcomes import (
    TALLY,
    check_checkpoints_finite,
    check_exit,
    check_metrics_finite,
    classify,
)
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings
from tests.fuzz.strategies import agents_run, agents_spec


def flat_box(space: dict[str, Any]) -> bool:
    return space["type"] == "box" and len(space["shape"]) == 1


def allowed(spec: dict[str, Any], run: dict[str, Any]) -> set[int]:
    """Exit codes a case may end with: 2 where a documented rule refuses it (a centralised critic or the agent's
    index on observations other than a 1-D Box; a Dict observation (a mask key) with either; masks in info for a
    group none of whose agents is there at the first reset), 1 for a fault."""
    maskable = any(a["act"]["type"] != "box" for a in spec["agents"])
    flat = all(flat_box(a["obs"]) for a in spec["agents"]) and not (spec["mask"] == "obs" and maskable)
    codes = {0}
    if not flat and (run["policy.critic"] != "local" or run["policy.agent_id"]):
        codes.add(2)
    if spec["fault"] is not None:
        codes.add(1)
    kinds = {a["name"].split("_")[0] for a in spec["agents"]}
    late = any(all(a["joins"] > 0 for a in spec["agents"] if a["name"].startswith(k + "_")) for k in kinds)
    if spec["mask"] == "info" and late and maskable:  # "auto" found no masks for a group absent at the first reset
        codes.add(2)
    return codes


def act_in_env(policy: Any, spec: dict[str, Any], steps: int = 12) -> None:
    env = FuzzAgents(spec)
    obs, infos = env.reset(seed=1)
    policy.reset()
    for _ in range(steps):
        acting = {a: obs[a] for a in env.agents}
        masks = {a: infos[a][MASK_KEY] for a in env.agents if MASK_KEY in infos.get(a, {})}
        actions = policy(acting, action_mask=masks or None)
        assert set(actions) == set(acting), (sorted(actions), sorted(acting))
        obs, _, _, _, infos = env.step(actions)  # refuses an action outside the space or against the mask
        if not env.agents:
            obs, infos = env.reset()
            policy.reset()


@fuzz_settings(ci=12, long=1500)
@given(spec=agents_spec(), run=agents_run(), data=st.data())
def test_a_generated_parallel_env_trains_or_is_refused_in_one_line(spec, run, data):
    export = data.draw(st.sampled_from([None] * 5 + ["pt2"]), label="export")
    overrides = {**run, "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)}}
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        outcome = classify(lambda: shell.train(overrides=overrides, run_dir=run_dir, progress=False),
                           CASE_SECONDS, "the case")
        TALLY["generated parallel env", outcome.code] += 1
        if check_exit(outcome, allowed(spec, run), run_dir, refusal_leaves_nothing=False):
            check_metrics_finite(run_dir, outcome.result.summary)
            check_checkpoints_finite(run_dir)
            act_in_env(shell.load_policy(run_dir), {**spec, "fault": None})
            if export is not None:
                for result in export_lanes(run_dir, export).values():
                    assert result.path.is_file() and np.isfinite(result.max_abs_diff)
