"""Generated VMAS scenarios (tests/fuzz/fuzz_vmas.py, given as a factory: env.backend = "vmas") through
``shell.train`` with its evaluation, ``load_policy`` acting in a fresh VMAS env, and export (tests/fuzz/outcomes.py).

Each case is a scenario (one or two kinds of agents, their observation sizes, forces and bounds, discrete choices,
communication, worlds that end at their own steps or never, now and then an observation the backend refuses or a
fault) and a tiny run (continuous, discrete or multi-discrete actions, one or two updates, the agent's index, a
concat critic, a recurrent policy, a time limit). What the docs refuse must be refused at start-up (exit 2, one
short line); an env's own fault may end training (exit 1, one line, the last checkpoint kept), and a planned
``raise`` the run reaches must; VMAS never refuses an action the library sends; everything else trains, with finite
metrics and checkpoints, a policy whose every action is in its agent's space, and (now and then) an export and a
``shell.resume`` from the factory.

Cases that meet a bug found here and still open are discarded (:func:`known_bug`); each such bug has a strict xfail
test at the end of this module, which fails once the bug is fixed, so that its case comes back.
"""

from __future__ import annotations

import tempfile
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import assume, given
from hypothesis import strategies as st

vmas = pytest.importorskip("vmas")  # the vmas extra (in dev)

import shell  # noqa: E402
from shell.errors import TrainingError  # noqa: E402
from shell.export import export_lanes  # noqa: E402
from tests.fuzz.fuzz_vmas import FuzzScenario  # noqa: E402
from tests.fuzz.outcomes import (  # noqa: E402
    TALLY,
    check_checkpoints_finite,
    check_exit,
    check_metrics_finite,
    check_resume,
    classify,
)
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings  # noqa: E402
from tests.fuzz.strategies import scenario_run, scenario_spec  # noqa: E402

#: keys of ``env.kwargs`` that the backend sets itself (shell/envs/vmas.py: OWN_KEYS, a sample)
OWN_KEYS = ("max_steps", "seed")


def refusals(spec: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """Every documented reason a scenario case is refused at start-up (docs/guides/vmas.md, "What is refused")."""
    out = []
    if spec["observation"] != "flat":
        out.append("an observation that is not a 1-D Box")
    if run["policy.critic"] == "state":
        out.append("policy.critic = 'state'")
    if run["env.action_mask"] not in ("auto", "none"):
        out.append("an action mask")
    kwargs = run["env.kwargs"]
    if any(key in kwargs for key in OWN_KEYS):
        out.append("an env.kwargs key the backend sets itself")
    if "no_such_argument" in kwargs:
        out.append("an env.kwargs key the scenario does not take")
    if kwargs.get("multidiscrete_actions") and kwargs["continuous_actions"]:
        out.append("VMAS's own refusal: multi-discrete continuous forces")
    return out


def allowed(spec: dict[str, Any], run: dict[str, Any]) -> set[int]:
    """The exit codes a case may end with: 2 alone for a documented refusal; 1 for a fault (a planned ``raise`` that
    training reaches: 1 alone; a fault of the first reset may be found at start-up: 2)."""
    if refusals(spec, run):
        return {2}
    fault = spec["fault"]
    if fault is None:
        return {0}
    steps = run["run.total_timesteps"] // run["env.num_envs"]  # steps of the batch of worlds
    if fault["kind"] == "raise" and 1 <= fault["at"] <= steps:
        return {1}
    return {0, 1, 2} if fault["at"] == 0 else {0, 1}


def known_bug(spec: dict[str, Any]) -> str | None:
    """A reported bug of the library that a case would meet (the case is discarded, not passed, until it is fixed;
    its strict xfail test below passes once it is). None open."""
    return None


def refused_by_vmas(exc: BaseException | None) -> str | None:
    """Where VMAS refused an action the library sent (its ``Environment._set_action`` asserts: NaN, out of range):
    the library's fault, never the env's (as :class:`tests.fuzz.fuzz_envs.FuzzIllegalAction` for gymnasium)."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        if isinstance(exc, AssertionError):
            frames = traceback.extract_tb(exc.__traceback__)
            if any(f.name == "_set_action" and "vmas" in f.filename for f in frames):
                return f"VMAS refused an action the library sent: {traceback.format_exception_only(exc)[-1].strip()}"
        exc = exc.__cause__ or exc.__context__
    return None


def act_in_env(policy: Any, spec: dict[str, Any], run: dict[str, Any], steps: int = 10) -> None:
    """Step a fresh VMAS env of the scenario (one world) with the loaded policy's actions, each checked against its
    agent's action space (VMAS's own checks refuse NaN and out-of-range actions too)."""
    kwargs = run["env.kwargs"]
    env = vmas.make_env(FuzzScenario({**spec, "fault": None}), num_envs=1, device="cpu", seed=0,
                        continuous_actions=kwargs["continuous_actions"],
                        multidiscrete_actions=kwargs.get("multidiscrete_actions", False))
    obs = env.reset()
    policy.reset()
    for _ in range(steps):
        actions = policy({agent.name: o[0].numpy() for agent, o in zip(env.agents, obs, strict=True)})
        assert set(actions) == {agent.name for agent in env.agents}, sorted(actions)
        batch = []
        for agent, space in zip(env.agents, env.action_space, strict=True):
            action = np.asarray(actions[agent.name])
            assert space.contains(action.astype(space.dtype) if action.ndim else action), (agent.name, action, space)
            batch.append(torch.as_tensor(action).reshape(1, -1))
        obs, _, dones, _ = env.step(batch)
        if bool(dones[0]):
            obs = env.reset()
            policy.reset()


def check_case(spec: dict[str, Any], run: dict[str, Any], export: str | None, resume: bool = False,
               label: str = "generated VMAS scenario") -> int:
    """Run one case and check its outcome (the module docstring); its exit code (tallied under ``label``)."""
    errors: list[BaseException] = []

    def train() -> Any:
        try:
            return shell.train(env=lambda: FuzzScenario(spec), overrides=run, run_dir=run_dir, progress=False)
        except TrainingError as exc:
            errors.append(exc)
            raise

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        outcome = classify(train, CASE_SECONDS, "the case")
        TALLY[label, outcome.code] += 1
        refused = refused_by_vmas(errors[0] if errors else None)
        assert refused is None, f"{refused} (exit 1: {outcome.message!r})"
        codes = allowed(spec, run)
        if check_exit(outcome, codes, run_dir):
            check_metrics_finite(run_dir, outcome.result.summary)
            check_checkpoints_finite(run_dir)
            act_in_env(shell.load_policy(run_dir), spec, run)
            if export is not None:
                for result in export_lanes(run_dir, export).values():
                    assert result.path.is_file() and np.isfinite(result.max_abs_diff)
            if resume:
                check_resume(run_dir, run, codes, lambda: FuzzScenario(spec))
        return outcome.code


@fuzz_settings(ci=60, long=1500)
@given(spec=scenario_spec(), run=scenario_run(), data=st.data())
def test_a_generated_vmas_scenario_trains_or_is_refused_in_one_line(spec, run, data):
    assume(known_bug(spec) is None)
    export = data.draw(st.sampled_from([None] * 7 + ["pt2"]), label="export")
    check_case(spec, run, export, data.draw(st.sampled_from([False] * 4 + [True]), label="resume"))


# ----------------------------------------------------------------------------- bugs found, fixed
# Each was a case the generated test discarded (known_bug) while the bug was open, held by a strict xfail; now fixed,
# its case is generated again and its test guards the fix. A new bug: its case in known_bug, its test here
# under @pytest.mark.xfail(strict=True, reason="open bug: ..."), named test_open_bug_...
@pytest.mark.parametrize("kind", ["nan_obs", "inf_obs"])
def test_fixed_bug_a_nan_observation_of_vmas_ends_training_with_one_line_not_nan_actions(kind):
    """NaN, and an infinity too (found with composite actions on the gymnasium backend: the policy acts on either
    with NaN actions)."""
    spec = {"kinds": [{"name": "runner", "count": 2, "obs_size": 3, "action_size": 2, "nvec": None, "u_range": 1.0,
                       "silent": True}], "dim_c": 0, "observation": "flat", "lengths": [0], "reward_scale": 1.0,
            "fault": {"kind": kind, "at": 1}}
    run = {"env.backend": "vmas", "env.kwargs": {"continuous_actions": True}, "env.num_envs": 2,
           "env.action_mask": "auto", "ppo.num_steps": 4, "ppo.num_minibatches": 1, "ppo.update_epochs": 1,
           "policy.hidden_sizes": [8], "policy.critic": "local", "run.total_timesteps": 16, "run.eval_episodes": 0,
           "run.checkpoint_every": 1, "run.device": "cpu", "run.loggers": []}
    check_case(spec, run, None, label="fixed bug")
