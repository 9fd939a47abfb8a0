"""``main.py export``: the ONNX and pt2 files act as ``load_policy`` does.

The parity bar: for Pendulum (Box, with observation normalisation), CartPole (Discrete), a
MultiDiscrete env, an image env (the Atari chain on a stub game) and a Dict env (image, vector and
Discrete keys), onnxruntime's and pt2's actions equal ``load_policy``'s on 1,000 observations from
rollouts plus 200 of them scaled by 10: discrete actions exactly, Box actions within 1e-5, in the
action space's dtype.
"""

import json
import os
import shutil
import subprocess
import sys

import gymnasium as gym
import numpy as np
import onnx
import onnxruntime
import pytest
import torch
from gymnasium import spaces

from shell.config import config_from_dict, load_config
from shell.envs import make_env
from shell.errors import ConfigError, ExportError
from shell.export import check_exported, export_policy, load_exported, observation_inputs
from shell.inference import load_policy
from shell.runner import Trainer

from .conftest import ROOT

CUSTOM = "tests.integration.custom_envs"
TINY = ["--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=2", "--set", "run.eval_episodes=0"]
RUNS = {  # name: main.py arguments of a short run
    # 15 updates of pendulum.toml: a policy that swings up, with large actions where the scaled observations are
    "pendulum": ["--config", "pendulum", "--set", "env.normalize_obs=true", "--set", "run.eval_episodes=0",
                 "--total-timesteps", "48000"],
    "cartpole": ["--config", "cartpole", *TINY, "--total-timesteps", "256"],
    "multidiscrete": ["--config", "cartpole", "--set", f"env.id={CUSTOM}:MultiDiscrete324-v0", *TINY,
                      "--total-timesteps", "128"],
    "image": ["--config", "pong", "--set", f"env.id={CUSTOM}:StubAtari-v0", "--set", "env.backend=gymnasium",
              "--set", "policy.cnn_precision=float32", *TINY, "--total-timesteps", "128"],
    "dict": ["--config", "cartpole", "--set", f"env.id={CUSTOM}:MixedDict-v0", "--set", "env.normalize_obs=true",
             *TINY, "--total-timesteps", "128"],
}
ONNX_DTYPES = {"tensor(float)": np.float32, "tensor(uint8)": np.uint8, "tensor(int64)": np.int64}


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    from .conftest import run_main

    folder = tmp_path_factory.mktemp("export_runs")
    out = {}
    for name, args in RUNS.items():
        proc = run_main(*args, "--run-dir", str(folder / name))
        assert proc.returncode == 0, proc.stderr[-2000:]
        out[name] = folder / name
    return out


def rollout_observations(run, n: int = 1000, num_envs: int = 8):
    """``n`` raw observations (as the env returns them, after the run's wrappers) of random actions on the
    run's env (the deterministic policy would visit fewer states, and its image CNN costs seconds here)."""
    config = load_config(str(run / "config.toml"))
    env = make_env(config.env, torch.device("cpu"), num_envs=num_envs).env
    env.action_space.seed(123)
    batches = []
    try:
        obs, _ = env.reset(seed=123)
        for _ in range(n // num_envs):
            batches.append(obs)
            obs, *_ = env.step(env.action_space.sample())
    finally:
        env.close()
    if isinstance(obs, dict):
        return {key: np.concatenate([b[key] for b in batches]) for key in obs}
    return np.concatenate(batches)


def with_scaled(obs, count: int = 200, factor: float = 10.0):
    """``obs`` followed by its first ``count`` observations scaled by ``factor`` (images saturate at 255;
    Discrete values cannot be scaled and are repeated)."""

    def scale(x: np.ndarray) -> np.ndarray:
        head = x[:count]
        if x.dtype == np.uint8:
            scaled = np.clip(head.astype(np.int64) * int(factor), 0, 255).astype(np.uint8)
        elif x.dtype.kind == "f":
            scaled = head * factor
        else:
            scaled = head
        return np.concatenate([x, scaled])

    return {key: scale(value) for key, value in obs.items()} if isinstance(obs, dict) else scale(obs)


def onnx_actions(path, obs) -> np.ndarray:
    """Run the ONNX file on ``obs`` with onnxruntime, feeding each input by its name and declared dtype."""
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    feeds = {}
    for spec in session.get_inputs():
        value = obs if spec.name == "obs" else obs[spec.name]
        feeds[spec.name] = np.asarray(value, dtype=ONNX_DTYPES[spec.type])
    (action,) = session.run(None, feeds)
    return action


def pt2_actions(path, obs, input_names: list[str]) -> np.ndarray:
    program = torch.export.load(str(path)).module()
    inputs = [obs if name == "obs" else obs[name] for name in input_names]
    dtypes = [np.float32 if np.asarray(x).dtype.kind == "f" else np.asarray(x).dtype for x in inputs]
    tensors = [torch.from_numpy(np.ascontiguousarray(x, dtype=d)) for x, d in zip(inputs, dtypes, strict=True)]
    with torch.inference_mode():
        return program(*tensors).numpy()


def assert_same_actions(got: np.ndarray, expected: np.ndarray, box: bool) -> None:
    assert got.dtype == expected.dtype and got.shape == expected.shape
    if box:
        assert np.abs(got.astype(np.float64) - expected.astype(np.float64)).max() <= 1e-5
    else:
        assert np.array_equal(got, expected)


@pytest.mark.parametrize("name", list(RUNS))
def test_exported_actions_equal_load_policy(runs, tmp_path, name):
    run = runs[name]
    policy = load_policy(run)
    obs = with_scaled(rollout_observations(run))
    expected = policy(obs)
    assert len(expected) == 1200
    box = isinstance(policy.action_space, spaces.Box)
    if name == "pendulum":  # the scaled observations reach tanh's flat part (|a| <= 2)
        assert np.mean(np.abs(expected[1000:]) > 1.8) >= 0.1
    if name == "image":
        assert obs.shape == (1200, 4, 84, 84) and obs.dtype == np.uint8
    onnx_file = export_policy(run, "onnx", tmp_path / "policy.onnx")
    pt2_file = export_policy(run, "pt2", tmp_path / "policy.pt2")
    assert onnx_file.path.is_file() and pt2_file.path.is_file()
    assert_same_actions(onnx_actions(onnx_file.path, obs), expected, box)
    assert_same_actions(pt2_actions(pt2_file.path, obs, pt2_file.input_names), expected, box)
    # one observation: a batch of one
    one = {k: v[:1] for k, v in obs.items()} if isinstance(obs, dict) else obs[:1]
    assert_same_actions(onnx_actions(onnx_file.path, one), expected[:1], box)
    if name == "dict":  # one input per key, named by the key, in the space's key order
        assert onnx_file.input_names == ["mode", "pixels", "vector"] == list(policy.observation_space.spaces)
        assert [i.name for i in onnxruntime.InferenceSession(str(onnx_file.path)).get_inputs()] == \
            onnx_file.input_names


def test_export_through_main_writes_beside_the_checkpoint(runs, main):
    run = runs["cartpole"]
    proc = main("export", str(run), "--format", "onnx")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert len(proc.stdout.strip().splitlines()) == 1  # the exporter's progress stays off stdout
    result = last_json(proc.stdout)
    (checkpoint,) = sorted((run / "checkpoints").glob("ckpt_*.pt"))
    assert result == {"export": str(checkpoint.with_suffix(".onnx")), "format": "onnx", "inputs": ["obs"],
                      "checked_observations": 65, "checked_max_abs_diff": 0.0}
    model = onnx.load(result["export"])
    metadata = json.loads({p.key: p.value for p in model.metadata_props}["ppo_core"])
    assert metadata["env_id"] == "CartPole-v1" and metadata["checkpoint"] == str(checkpoint)
    assert metadata["inputs"] == [{"name": "obs", "shape": ["batch", 4], "dtype": "float32"}]
    assert metadata["output"]["dtype"] == "int64" and metadata["output"]["shape"] == ["batch"]
    assert not list((run / "checkpoints").glob(".*"))  # no temporary file left behind


@pytest.mark.parametrize(("args", "needle"), [
    (["export", "{tmp}/corrupt.pt", "--format", "pt2"], "checkpoint {tmp}/corrupt.pt is truncated or corrupt"),
    (["export", "{cartpole}", "--format", "tflite"], "invalid choice: 'tflite'"),
])
def test_bad_export_input_is_one_line_exit_2(runs, main, tmp_path, args, needle):
    (tmp_path / "corrupt.pt").write_bytes(b"not a checkpoint")
    args = [a.format(tmp=tmp_path, cartpole=runs["cartpole"]) for a in args]
    proc = main(*args)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr and proc.stdout == ""
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and needle.format(tmp=tmp_path) in line, line


@pytest.mark.parametrize(("target", "fmt", "out", "needle"), [
    ("no/such/run", "pt2", None, "no/such/run: no such run dir or checkpoint"),
    ("{tmp}", "pt2", None, "no checkpoint (ckpt_*.pt) in"),
    ("{cartpole}", "pt2", "{tmp}", "is a folder; name the file to write"),
    ("{cartpole}", "tflite", None, "unknown export format 'tflite'; choose one of ['onnx', 'pt2']"),
])
def test_bad_export_input_raises_config_error(runs, tmp_path, target, fmt, out, needle):
    def fill(text):
        return None if text is None else text.format(tmp=tmp_path, cartpole=runs["cartpole"])

    with pytest.raises(ConfigError) as info:
        export_policy(fill(target), fmt, fill(out))
    assert needle in str(info.value) and "\n" not in str(info.value)


def test_missing_export_extra_names_the_pip_command(runs, tmp_path):
    fake = tmp_path / "site"
    (fake / "onnxruntime").mkdir(parents=True)
    (fake / "onnxruntime" / "__init__.py").write_text("raise ImportError('onnxruntime is not installed')\n")
    env = {**os.environ, "PYTHONPATH": f"{fake}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "export", str(runs["cartpole"])],
                          capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines()[-1] == \
        'error: --format onnx needs onnxruntime; run: pip install -e ".[export]"'


def test_a_file_that_fails_the_check_is_an_error_and_is_not_left(runs, tmp_path, monkeypatch):
    def differs(*args):
        raise ExportError("the exported policy differs")

    monkeypatch.setattr("shell.export.check_exported", differs)
    out = tmp_path / "policy.onnx"
    with pytest.raises(ExportError, match="differs"):
        export_policy(runs["cartpole"], "onnx", out)
    assert list(tmp_path.iterdir()) == []


def test_the_check_catches_a_different_action(runs):
    run = runs["pendulum"]
    policy = load_policy(run)
    obs = rollout_observations(run, n=64)
    exact = lambda *inputs: policy(obs)  # noqa: E731
    assert check_exported(exact, policy, obs, policy.observation_space) == 0.0
    nudged = lambda *inputs: policy(obs) + np.float32(1e-4)  # noqa: E731
    with pytest.raises(ExportError, match="differs from the checkpoint's on 64 of 64 observations"):
        check_exported(nudged, policy, obs, policy.observation_space)
    wrong_dtype = lambda *inputs: policy(obs).astype(np.float64)  # noqa: E731
    with pytest.raises(ExportError, match="returns float64"):
        check_exported(wrong_dtype, policy, obs, policy.observation_space)


# ----------------------------------------------------------------------------- more action and observation spaces
def tiny_run(tmp_path, env: dict, policy: dict | None = None):
    config = config_from_dict({"env": {"num_envs": 2, **env}, "policy": policy or {},
                               "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                               "run": {"eval_episodes": 0, "device": "cpu", "total_timesteps": 32}})
    Trainer(config, tmp_path / "run").train()
    return tmp_path / "run"


@pytest.mark.parametrize("env_id", ["IntBox-v0", "LockedJointBox-v0", "MatrixBox-v0", "Float64Box-v0",
                                    "Discrete32-v0"])
def test_other_action_spaces_export_in_their_dtype(tmp_path, env_id):
    """Integer Box (rounded), locked joints (held, float64), a matrix Box, Discrete with start and int32."""
    run = tiny_run(tmp_path, {"id": f"{CUSTOM}:{env_id}"})
    policy = load_policy(run)
    space = policy.observation_space
    obs = np.stack([space.sample() for _ in range(256)]) * np.float32(4.0)  # beyond the [-1, 1] bounds too
    expected = policy(obs)
    for fmt in ("onnx", "pt2"):
        result = export_policy(run, fmt, tmp_path / f"policy.{fmt}")
        got = load_exported(result.path, fmt)(*observation_inputs(obs, space))
        assert got.dtype == policy.action_space.dtype == expected.dtype
        box = isinstance(policy.action_space, spaces.Box) and policy.action_space.dtype.kind == "f"
        assert_same_actions(got, expected, box)
        assert all(policy.action_space.contains(a) for a in got)


def test_state_dependent_std_and_a_discrete_observation_export(tmp_path):
    run = tiny_run(tmp_path, {"id": "Pendulum-v1"}, {"std": "state"})
    assert export_policy(run, "onnx", tmp_path / "p.onnx").max_abs_diff <= 1e-5
    run = tiny_run(tmp_path / "frozen", {"id": "FrozenLake-v1"})
    result = export_policy(run, "onnx", tmp_path / "f.onnx")
    metadata = json.loads({p.key: p.value for p in onnx.load(str(result.path)).metadata_props}["ppo_core"])
    assert metadata["inputs"] == [{"name": "obs", "shape": ["batch"], "dtype": "int64"}]
    policy = load_policy(run)
    states = np.arange(16)
    assert np.array_equal(load_exported(result.path, "onnx")(states), policy(states))


def test_a_bfloat16_cnn_exports_to_pt2_and_is_refused_for_onnx(tmp_path):
    run = tiny_run(tmp_path, {"id": f"{CUSTOM}:MixedDict-v0"}, {"cnn_precision": "bfloat16"})
    with pytest.raises(ConfigError, match=r"no bfloat16 convolutions .* export with format='pt2'$"):
        export_policy(run, "onnx", tmp_path / "p.onnx")
    assert not (tmp_path / "p.onnx").exists()
    assert export_policy(run, "pt2", tmp_path / "p.pt2").max_abs_diff == 0.0


@pytest.mark.parametrize(("env_id", "kind"), [("CartPoleNoVel-v1", "lstm"), ("PendulumNoVel-v1", "gru")])
def test_a_recurrent_policy_exports_with_its_state_as_inputs_and_outputs(tmp_path, env_id, kind):
    """Whole episodes of the real env: the file, fed its own state_out, acts as load_policy does."""
    run = tiny_run(tmp_path, {"id": env_id}, {"recurrent": kind, "rnn_hidden_size": 16})
    for fmt in ("onnx", "pt2"):
        result = export_policy(run, fmt, tmp_path / f"policy.{fmt}")
        assert result.input_names == ["obs", "state", "episode_start"]
        run_file = load_exported(result.path, fmt)
        policy = load_policy(run)
        env = gym.vector.SyncVectorEnv([lambda: gym.make(env_id)] * 4)
        obs, _ = env.reset(seed=7)
        state = np.zeros((4, policy.agent.initial_state(1).shape[1]), np.float32)
        start = np.ones(4, bool)
        box = isinstance(policy.action_space, spaces.Box)
        for _ in range(60):  # CartPole episodes end within that: restarts are exercised
            expected = policy(obs, episode_start=start)
            got, state = run_file(obs.astype(np.float32), state, start)
            assert_same_actions(np.asarray(got), expected, box)
            obs, _, terminated, truncated, _ = env.step(expected)
            start = terminated | truncated
        env.close()


def test_export_names_the_group_to_pick(tmp_path):
    """A run with a policy per group needs a group named (one line each); a run of one policy takes none."""
    pytest.importorskip("pettingzoo")
    from pathlib import Path

    from shell.errors import ConfigError
    from shell.export import export_policy

    fixtures = Path(__file__).resolve().parents[1] / "fixtures" / "runs_32f030c"
    tag = shutil.copytree(fixtures / "simple-tag", tmp_path / "tag")
    with pytest.raises(ConfigError, match=r"\['adversary', 'agent'\]: name one to export") as info:
        export_policy(tag, "pt2")
    assert "none of them" not in str(info.value)
    with pytest.raises(ConfigError, match="'nope' is none of them"):
        export_policy(tag, "pt2", group="nope")
    spread = shutil.copytree(fixtures / "simple-spread", tmp_path / "spread")
    with pytest.raises(ConfigError, match="the run has one policy; export it without a group"):
        export_policy(spread, "pt2", group="agent")
