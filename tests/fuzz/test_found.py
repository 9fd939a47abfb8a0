"""Regression tests of the bugs the fuzzer found (docs/reliability.md lists them), each named after the bug."""

from __future__ import annotations

import ast
import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

import shell
from shell.config import apply_overrides, load_config
from shell.envs.base import check_action_space
from shell.errors import ConfigError, TrainingError, front_end
from shell.evaluation import eval_checkpoint
from shell.observations import obs_layout
from tests.fuzz.outcomes import Outcome, check_checkpoints_finite, check_export, check_failure, fuzz_overrides


@pytest.mark.parametrize("key", ["ppo.gamma", "ppo.gae_lambda", "ppo.learning_rate", "ppo.clip_coef", "ppo.vf_coef",
                                 "ppo.ent_coef", "ppo.max_grad_norm", "ppo.adam_eps", "ppo.target_kl",
                                 "ppo.reward_scale", "env.obs_clip", "env.reward_clip", "policy.init_log_std",
                                 "policy.image_scale", "run.tracker_timeout", "selfplay.latest_prob",
                                 "selfplay.random_prob"])
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


def test_a_nan_reward_in_evaluation_ends_with_one_line_not_a_crash(tmp_path):
    """A reward of NaN met only in the final evaluation (training never reached it) made the summary's
    ``statistics.pstdev`` raise AttributeError: a traceback from the CLI. It is the env's fault: exit 1, one line,
    the last good checkpoint kept; ``eval`` of the checkpoint says the same."""
    spec = {"obs": {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0},
            "act": {"type": "box", "shape": [1], "dtype": "float32", "low": -1.0, "high": 1.0},
            "episodes": [[20, "truncated"]], "reward_scale": 1.0, "obs_scale": 1.0, "mask": None,
            "fault": {"kind": "nan_reward", "at": 10}, "seed": 0}
    run = {"env.num_envs": 1, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "run.total_timesteps": 4,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(TrainingError) as info:
        shell.train(overrides=fuzz_overrides(spec, run), run_dir=tmp_path / "run", progress=False)
    message = str(info.value)
    assert "\n" not in message and "gave a non-finite reward (nan) in an evaluation episode" in message
    assert "the last good checkpoint is" in message
    check_failure(Outcome(1, message), tmp_path / "run")
    with pytest.raises(TrainingError, match=r"non-finite reward \(nan\) in an evaluation episode$"):
        eval_checkpoint(tmp_path / "run", episodes=1)


DISCRETE_OBS = {"type": "discrete", "n": 3, "start": 5}


def test_a_discrete_observation_outside_its_space_ends_with_one_line_not_a_crash(tmp_path):
    """An env that returned 8 for Discrete(3, start=5) met torch's one_hot, whose RuntimeError ("Class values must
    be smaller than num_classes") was a traceback from the CLI. It is the env's fault: exit 1 with one line naming
    the value and the space; ``load_policy`` refuses it with a ValueError."""
    spec = {"obs": DISCRETE_OBS, "act": {"type": "discrete", "n": 2, "start": 0}, "episodes": [[20, "truncated"]],
            "reward_scale": 1.0, "obs_scale": 1.0, "mask": None, "fault": {"kind": "outside_obs", "at": 3}, "seed": 0}
    run = {"env.num_envs": 1, "ppo.num_steps": 8, "ppo.num_minibatches": 1, "run.total_timesteps": 16,
           "run.eval_episodes": 0, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(TrainingError) as info:
        shell.train(overrides=fuzz_overrides(spec, run), run_dir=tmp_path / "run", progress=False)
    assert str(info.value) == ("env Fuzz-v0: an observation 8 is outside its space Discrete(3, start=5) (at vector "
                               "step 3); no checkpoint was written yet")
    result = shell.train(overrides=fuzz_overrides({**spec, "fault": None}, run), run_dir=tmp_path / "ok",
                         progress=False)
    with pytest.raises(ValueError, match=r"^an observation 4 is outside its space Discrete\(3, start=5\)$"):
        result.policy(np.int64(4))
    assert result.policy(np.int64(7)) in (0, 1)


def test_a_gone_agent_with_a_discrete_observation_that_does_not_start_at_0_trains(tmp_path):
    """A PettingZoo agent that had left stood in its group's rows as the observation 0, which a Discrete(3,
    start=5) does not hold: one_hot raised a RuntimeError (a traceback) as soon as an agent left before the others.
    The stand-in is now the space's start."""
    agent = {"obs": DISCRETE_OBS, "act": {"type": "discrete", "n": 2, "start": 0}, "joins": 0, "end": "terminated"}
    spec = {"agents": [{**agent, "name": "relay_0", "lifetime": 1}, {**agent, "name": "relay_1", "lifetime": 4}],
            "mask": None, "fault": None, "seed": 0}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 1, "ppo.num_steps": 8, "ppo.num_minibatches": 1, "run.total_timesteps": 8,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    result = shell.train(overrides=run, run_dir=tmp_path / "run", progress=False)
    assert result.summary["env_steps"] == 8 and np.isfinite(result.summary["eval_return_mean"])


def test_an_unknown_key_without_a_close_match_is_refused_in_one_short_line():
    """``ppo.batch_size`` (no known key is close) listed all sixteen [ppo] keys: a line of 296 characters."""
    with pytest.raises(ConfigError) as info:
        apply_overrides({}, {"ppo.batch_size": 64})
    message = str(info.value)
    assert message == ("overrides key 'ppo.batch_size': unknown key ppo.batch_size; known: adam_eps, anneal_lr, "
                       "average_decay, average_start, clip_coef, clip_vloss, desired_kl, ... (18 more)")
    assert len("error: " + message) <= 200


LONG_TUPLE = spaces.Tuple([spaces.Box(np.array([-1e39, -1.0, 1e6]), np.array([1e39, 1.0, 1e6 + 1]), dtype=np.float64),
                           spaces.Box(0, 255, (7, 5, 2), np.uint8), spaces.MultiDiscrete([4, 3])])
LONG_BOX = spaces.Box(np.array([-np.inf, -1000.0, 0.0, -0.1]), np.array([np.inf, 0.2, 1e-6, 1.0]), dtype=np.float64)


@pytest.mark.parametrize(("check", "space", "start"), [
    (obs_layout, LONG_TUPLE, "unsupported observation space Tuple of 3 spaces; supported: "),
    (obs_layout, spaces.Dict({"pos": spaces.Tuple([spaces.Box(1e6, 1e6 + 1, (3,), np.float64), spaces.MultiBinary(4)]),
                              "b": spaces.MultiBinary((2, 3))}),
     "observation key 'pos' has a space that cannot be encoded: Tuple of 2 spaces; set env.obs_keys = ['b']"),
    (check_action_space, LONG_BOX, "unsupported action space Box(shape (4,), float64, bounds per component): the "
                                   "tanh-squashed policy needs finite Box bounds"),
])
def test_a_space_with_a_long_repr_is_named_in_one_short_line(check, space, start):
    """An unsupported space was quoted whole: a Tuple of Boxes with bounds per component made a line of 279
    characters; a Tuple under a Dict key, 206. A space whose text is long is now summed up."""
    with pytest.raises(ConfigError) as info:
        check(space)
    message = str(info.value)
    assert message.startswith(start) and len("error: " + message) <= 200, message


@pytest.mark.parametrize("recurrent", ["gru", "none"])
def test_a_group_of_agents_absent_for_a_whole_rollout_is_not_updated_and_training_goes_on(tmp_path, recurrent):
    """A group whose only agent joins late had no valid row in the first rollout: the recurrent update normalised an
    empty minibatch (ValueError: normalize_advantages got an empty tensor) and the feed-forward one cut an empty
    batch into minibatches of size 0 (ValueError from range): a traceback. Such a group now takes no step in that
    update (its metrics are 0), and trains once it acts."""
    relay = {"name": "relay_0", "obs": {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0},
             "act": {"type": "multidiscrete", "nvec": [4, 1, 1], "start": [0, -1, 2]}, "joins": 0, "lifetime": 4,
             "end": "terminated"}
    scout = {"name": "scout_0", "obs": {"type": "box", "shape": [2], "dtype": "float32", "low": 0.0, "high": 1.0},
             "act": {"type": "discrete", "n": 3, "start": 0}, "joins": 3, "lifetime": 5, "end": "terminated"}
    spec = {"agents": [relay, scout], "mask": None, "fault": None, "seed": 13193}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 2, "ppo.num_steps": 4, "ppo.num_minibatches": 2, "policy.recurrent": recurrent,
           "policy.rnn_hidden_size": 8, "run.total_timesteps": 16, "run.eval_episodes": 1, "run.device": "cpu",
           "run.loggers": []}
    result = shell.train(overrides=run, run_dir=tmp_path / "run", progress=False)
    assert result.summary["env_steps"] == 16 and np.isfinite(result.summary["eval_return_mean"])
    check_checkpoints_finite(tmp_path / "run")


def test_a_wrong_type_in_set_with_a_long_example_stays_one_short_line():
    """``--set env.wrappers="gymnasium.wrappers:ClipReward"`` (a string for an array of tables) was answered with
    the value twice and a whole example of [[env.wrappers]]: 319 characters. Past 200 the example is left out.
    From Python the line names the overrides entry (``overrides entry '...'``) and has no ``error: `` before it."""
    for words, prefix in (("cli", "error: "), ("python", "")):
        with pytest.raises(ConfigError) as info, front_end(words):
            load_config(None, ['env.wrappers="gymnasium.wrappers:ClipReward"'])
        message = str(info.value)
        assert message.endswith("expected an array of tables, e.g. [[env.wrappers]]; write it as TOML")
        assert len(prefix + message) <= 200, message


def test_a_refusal_found_by_the_first_reset_leaves_no_run_dir_behind(tmp_path):
    """``env.action_mask = 'info'`` on an env whose masks come from ``action_masks()`` is refused at the first reset
    (exit 2), after config.toml, versions.json and metrics.csv were written: the same command, corrected, was then
    refused too (the run dir is not empty). The run dir made for the run goes, as for any start-up error."""
    spec = {"obs": {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0},
            "act": {"type": "discrete", "n": 3, "start": -3}, "episodes": [[8, "both"]], "reward_scale": 1.0,
            "obs_scale": 1.0, "mask": "method", "fault": None, "seed": 0}
    run = {"env.num_envs": 2, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "run.total_timesteps": 8,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(ConfigError, match=r"env.action_mask = 'info': the env's info has no 'action_mask' key"):
        shell.train(overrides=fuzz_overrides(spec, run, "info"), run_dir=tmp_path / "run", progress=False)
    assert not (tmp_path / "run").exists()
    result = shell.train(overrides=fuzz_overrides(spec, run, "method"), run_dir=tmp_path / "run", progress=False)
    assert result.summary["env_steps"] == 8


def test_a_failure_to_make_the_env_quotes_long_kwargs_cut_short():
    """An env that cannot be made from ``env.kwargs`` was named with the whole kwargs: a spec of a few hundred
    characters made a line of 624 (and gymnasium's own message quotes them whole too; a PettingZoo env's id is
    longer still). Both are cut short: the env's message at 72 characters, the kwargs at 40."""
    from shell.config import config_from_dict
    from shell.envs import make_env

    config = config_from_dict({"env": {"id": "CartPole-v1", "num_envs": 1, "kwargs": {"no_such_kwarg": "x" * 300}}})
    with pytest.raises(ConfigError) as info:
        make_env(config.env, torch.device("cpu"))
    message = str(info.value)
    assert message.startswith("cannot make env 'CartPole-v1': CartPoleEnv.__init__() got an unexpected keyword ")
    assert "(env.kwargs = {'no_such_kwarg': 'xxx" in message and message.endswith("...)"), message
    assert len("error: " + message) <= 200, message


def test_a_group_absent_at_the_first_reset_is_not_trained_unmasked_in_silence(tmp_path):
    """With ``env.action_mask = 'auto'`` a group's first reset decides whether its agents' info carries masks; a
    group whose agents all join later had no info then, so it was decided "no masks" and trained unmasked: the
    env got illegal actions. Its agents' masks, once they appear, are now refused under "auto" (exit 2, one line,
    no run dir left); ``'info'`` trains it masked, and a group without masks trains as before."""
    agent = {"obs": {"type": "box", "shape": [1], "dtype": "float32", "low": -1.0, "high": 1.0},
             "act": {"type": "discrete", "n": 2, "start": 0}, "end": "truncated"}
    spec = {"agents": [{**agent, "name": "scout_0", "joins": 0, "lifetime": 6,
                        "act": {"type": "multidiscrete", "nvec": [2, 2], "start": [0, 0]}},
                       {**agent, "name": "relay_0", "joins": 1, "lifetime": 2}], "mask": "info", "fault": None,
            "seed": 1095}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 1, "ppo.num_steps": 8, "ppo.num_minibatches": 1, "run.total_timesteps": 16,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(ConfigError) as info:
        shell.train(overrides=run, run_dir=tmp_path / "auto", progress=False)
    assert str(info.value) == ("env tests.fuzz.fuzz_agents: no agent of group 'relay' was to move at the first "
                               "reset, so env.action_mask = 'auto' found no masks, but its agents' info holds "
                               "'action_mask': set env.action_mask = 'info'")
    assert not (tmp_path / "auto").exists()
    result = shell.train(overrides={**run, "env.action_mask": "info"}, run_dir=tmp_path / "info", progress=False)
    assert result.summary["env_steps"] == 16  # the env refuses an action against its mask: none was sent
    unmasked = json.dumps({**spec, "mask": None})
    result = shell.train(overrides={**run, "env.kwargs": {"spec": unmasked}}, run_dir=tmp_path / "none",
                         progress=False)
    assert result.summary["env_steps"] == 16


def test_a_multi_agent_refusal_names_a_space_of_many_lines_in_one_short_line(tmp_path):
    """``policy.agent_id`` on agents that observe a rank-3 integer Box quoted the space as numpy prints it: over
    several lines (numpy breaks a 3-D array's rows), so the refusal was not one line."""
    box = {"type": "box", "shape": [3, 1, 2], "dtype": "int32", "low": [[[-2**31, 0]], [[0, -2**31]], [[-1, -1]]],
           "high": [[[2**31 - 1, 0]], [[2**31 - 1, 2**31 - 1]], [[1, 1]]]}
    spec = {"agents": [{"name": "scout_0", "obs": box, "act": {"type": "discrete", "n": 2, "start": 0}, "joins": 0,
                        "lifetime": 4, "end": "terminated"}], "mask": None, "fault": None, "seed": 0}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 1, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "policy.agent_id": True,
           "run.total_timesteps": 4, "run.eval_episodes": 0, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(ConfigError) as info:
        shell.train(overrides=run, run_dir=tmp_path / "run", progress=False)
    assert str(info.value) == ("policy.agent_id needs a 1-D Box or a Dict observation; the agents of group 'scout' "
                               "observe Box(shape (3, 1, 2), int32, bounds per component)")


def test_a_nan_observation_ends_training_with_one_line_instead_of_nan_actions(tmp_path):
    """An env that returned NaN in an observation got NaN actions back: the policy acted on it, and the actions
    went to the env in silence (a strict env refused them, others would step on them). It is the env's fault:
    exit 1, one line naming the step (and the Dict key); ``load_policy`` refuses NaN with a one-line ValueError."""
    spec = {"obs": {"type": "box", "shape": [1, 1, 2], "dtype": "float32", "low": -1.0, "high": 1.0},
            "act": {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0},
            "episodes": [[10, "both"]], "reward_scale": 1.0, "obs_scale": 1.0, "mask": None,
            "fault": {"kind": "nan_obs", "at": 3}, "seed": 1}
    run = {"env.num_envs": 1, "ppo.num_steps": 16, "ppo.num_minibatches": 1, "run.total_timesteps": 16,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(TrainingError) as info:
        shell.train(overrides=fuzz_overrides(spec, run), run_dir=tmp_path / "run", progress=False)
    assert str(info.value) == ("env Fuzz-v0: an observation holds NaN (at vector step 3); no checkpoint was "
                               "written yet")
    result = shell.train(overrides=fuzz_overrides({**spec, "fault": None}, run), run_dir=tmp_path / "ok",
                         progress=False)
    with pytest.raises(ValueError, match=r"^an observation holds NaN$"):
        result.policy(np.full((1, 1, 2), np.nan, np.float32))


@pytest.mark.parametrize("act", [
    {"type": "box", "shape": [1, 2], "dtype": "float16", "low": -1.0, "high": 1.0},
    {"type": "dict", "spaces": {"a": {"type": "box", "shape": [1, 2], "dtype": "float16", "low": -1.0, "high": 1.0}}},
])
def test_an_infinite_observation_ends_training_with_one_line(tmp_path, act):
    """Found with composite actions, and the same for a plain Box: a float16 observation of 1e6 overflows to inf
    (inside its space, whose high is inf), and the policy sent NaN actions back to the env. Like NaN, an infinity
    now ends training with one line naming the step (exit 1); ``load_policy`` refuses it in one line."""
    spec = {"obs": {"type": "box", "shape": [2], "dtype": "float16", "low": [1e6, 0.0], "high": [1e6 + 1, math.inf]},
            "act": act, "episodes": [[5, "both"]], "reward_scale": 0.0, "obs_scale": 1e6, "mask": None,
            "fault": None, "seed": 30}
    run = {"env.num_envs": 1, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "run.total_timesteps": 4,
           "run.eval_episodes": 0, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(TrainingError) as info:
        shell.train(overrides=fuzz_overrides(spec, run), run_dir=tmp_path / "run", progress=False)
    assert str(info.value) == ("env Fuzz-v0: an observation holds an infinity (or a value beyond float32's range) "
                               "(at vector step 0); no checkpoint was written yet")


def test_a_nan_observation_of_an_agent_ends_training_with_one_line(tmp_path):
    """The same kind on the PettingZoo backend, in a Dict observation (the mask key beside it): one line naming
    the key and the step, exit 1."""
    agent = {"obs": {"type": "box", "shape": [3], "dtype": "float64", "low": -1.0, "high": 1.0},
             "act": {"type": "discrete", "n": 3, "start": 0}, "joins": 0, "lifetime": 20, "end": "truncated"}
    spec = {"agents": [{**agent, "name": "relay_0"}, {**agent, "name": "relay_1"}], "mask": "obs",
            "fault": {"kind": "nan_obs", "at": 2}, "seed": 0}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 1, "ppo.num_steps": 8, "ppo.num_minibatches": 1, "run.total_timesteps": 8,
           "run.eval_episodes": 1, "run.device": "cpu", "run.loggers": []}
    with pytest.raises(TrainingError) as info:
        shell.train(overrides=run, run_dir=tmp_path / "run", progress=False)
    assert str(info.value) == ("env tests.fuzz.fuzz_agents: an observation holds NaN in key 'observation' (at vector "
                               "step 2); no checkpoint was written yet")


def test_a_tuple_of_two_images_is_refused_in_one_short_line():
    """A Tuple of two uint8 images has a text of 70 characters, under the summary's limit, and the refusal added
    the space's type name twice and a long list of what is supported: 201 characters."""
    space = spaces.Tuple([spaces.Box(0, 255, (4, 10, 1), np.uint8), spaces.Box(0, 255, (1, 4, 10), np.uint8)])
    with pytest.raises(ConfigError) as info:
        obs_layout(space)
    message = str(info.value)
    assert message.startswith("unsupported observation space Tuple(Box(0, 255, (4, 10, 1), uint8), ")
    assert len("error: " + message) <= 200, message


def _worst_case_length(call: ast.Call, source: str, module: object) -> int | None:
    """The longest line (with the CLI's ``error: ``) an error raised as ``call`` can make, counting every
    ``space_text(x, limit)`` at its limit, every ``clipped(x, limit)`` at its limit, a module constant at its
    length and any other value at 24 characters (a name, a number); None where the message names no space."""
    message = call.args[0] if call.args else None
    if message is None or "space_text(" not in (ast.get_source_segment(source, message) or ""):
        return None
    length = len("error: ")
    for node in ast.walk(message):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            length += len(node.value)
        elif isinstance(node, ast.FormattedValue):
            value = node.value
            name = getattr(value.func, "id", None) if isinstance(value, ast.Call) else None
            if name in ("space_text", "clipped"):
                limit = value.args[1].value if len(value.args) > 1 else {"space_text": 72, "clipped": 80}[name]
                length += limit + (2 if node.conversion == ord("r") else 0)
            elif isinstance(value, ast.Name) and isinstance(getattr(module, value.id, None), str):
                length += len(getattr(module, value.id))
            else:
                length += 24
    return length


def test_every_message_that_names_a_space_fits_one_line_with_its_longest_space_text():
    """The kind behind the two bugs above and the space of many lines: a message that quotes a space has room for
    the space's longest text (``space_text``'s limit) beside its own words. Every raise in shell/ whose message
    names a space is read here and its longest line bounded: at most 200 characters with the CLI's prefix."""
    import importlib

    root = Path(shell.__file__).parent
    checked, too_long = 0, []
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        if "space_text(" not in source:
            continue
        module = importlib.import_module(".".join(path.relative_to(root.parent).with_suffix("").parts))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call):
                longest = _worst_case_length(node.exc, source, module)
                if longest is not None:
                    checked += 1
                    if longest > 200:
                        too_long.append(f"{path.relative_to(root.parent)}:{node.lineno}: {longest}")
    assert checked >= 15 and not too_long, too_long


def test_masks_given_for_one_group_leave_a_group_of_box_actions_unmasked(tmp_path):
    """A run of two groups, one of Discrete actions with masks (in ``info``) and one of Box actions: the loaded
    policy, given the masks of the Discrete agents only (a Box action takes none), raised KeyError on the Box
    agent. A group with no entry in ``action_mask`` now acts unmasked; a group with masks for some of its acting
    agents and not others is refused in one line."""
    box_obs = {"type": "box", "shape": [1], "dtype": "float32", "low": -1.0, "high": 1.0}
    agents = [{"name": "scout_0", "act": {"type": "discrete", "n": 2, "start": 0}},
              {"name": "scout_1", "act": {"type": "discrete", "n": 2, "start": 0}},
              {"name": "relay_0", "act": {"type": "box", "shape": [1], "dtype": "float32", "low": -1.0, "high": 2.0}}]
    spec = {"agents": [{**a, "obs": box_obs, "joins": 0, "lifetime": 3, "end": "terminated"} for a in agents],
            "mask": "info", "fault": None, "seed": 0}
    run = {"env.backend": "pettingzoo", "env.id": "tests.fuzz.fuzz_agents", "env.kwargs": {"spec": json.dumps(spec)},
           "env.num_envs": 1, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "run.total_timesteps": 4,
           "run.eval_episodes": 0, "run.device": "cpu", "run.loggers": []}
    shell.train(overrides=run, run_dir=tmp_path / "run", progress=False)
    policy = shell.load_policy(tmp_path / "run")
    obs = {a: np.zeros(1, np.float32) for a in ("scout_0", "scout_1", "relay_0")}
    only_first = np.array([True, False])
    actions = policy(obs, action_mask={"scout_0": only_first, "scout_1": only_first})
    assert actions["scout_0"] == 0 and actions["scout_1"] == 0 and -1.0 <= float(actions["relay_0"][0]) <= 2.0
    with pytest.raises(ValueError) as info:
        policy(obs, action_mask={"scout_0": only_first})
    message = str(info.value)
    assert "\n" not in message and "group 'scout'" in message and "['scout_1']" in message
    with pytest.raises(ValueError, match="mask"):  # the masked group with no masks at all: its policy's refusal
        policy(obs, action_mask={"relay_0": None})


@pytest.mark.parametrize("act", [{"type": "multibinary", "n": 1}, {"type": "discrete", "n": 2, "start": 0}])
def test_a_policy_trained_without_masks_reads_an_action_mask_key_as_observation_not_as_mask(tmp_path, act):
    """With ``env.action_mask = "none"`` an env's ``"action_mask"`` observation key is an input of the policy like
    any other. ``load_policy`` still took it as a mask: it forced the actions the policy had never been trained to
    mask (export then differed from the policy on 6 of 64 observations), or refused an all-false row as a state
    with no legal action. Only a policy trained with the masks of that key (``"obs"``) reads it as its mask."""
    spec = {"obs": {"type": "box", "shape": [1], "dtype": "int8", "low": -128.0, "high": 127.0}, "act": act,
            "episodes": [[2, "terminated"], [1, "terminated"]], "reward_scale": 1.0, "obs_scale": 1.0, "mask": "obs",
            "one_legal": 0.0, "fault": None, "seed": 0, "enforce_mask": False}  # the run ignores the mask
    run = {"env.num_envs": 1, "ppo.num_steps": 4, "ppo.num_minibatches": 1, "run.total_timesteps": 4,
           "run.eval_episodes": 0, "run.device": "cpu", "run.loggers": []}
    shell.train(overrides=fuzz_overrides(spec, run, "none"), run_dir=tmp_path / "run", progress=False)
    policy = shell.load_policy(tmp_path / "run")
    assert not policy.masked
    obs = {"action_mask": np.zeros((8, 2 if act["type"] == "discrete" else 1), np.int8),
           "obs": np.arange(-4, 4, dtype=np.int8)[:, None]}
    unmasked = policy(obs)  # an all-false "mask" is only an observation here
    flipped = policy({**obs, "action_mask": np.ones_like(obs["action_mask"])})
    assert unmasked.shape[0] == 8 and flipped.shape[0] == 8
    check_export(tmp_path / "run", "onnx")
