"""Errors, checkpoints, resume, signals, NaN, eval, plots: through the real CLI where a user would meet them."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from shell.api import resume
from shell.checkpoint import load_checkpoint, save_checkpoint
from shell.config import config_from_dict
from shell.errors import ConfigError
from shell.inference import load_agent, load_policy
from shell.runner import Trainer

from .conftest import ROOT

CUSTOM = "tests.integration.custom_envs"
TINY = ["--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=2", "--set", "run.eval_episodes=2"]


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


# ----------------------------------------------------------------------------- bad input
def test_malformed_toml_names_the_line(main, tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text("[ppo]\ngamma = 0.9\nclip_coef = = 0.2\n")
    proc = main("--config", str(bad), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "malformed TOML" in last_line(proc.stderr) and "line 3" in last_line(proc.stderr)


def test_unreadable_config(main, tmp_path):
    bad = tmp_path / "binary.toml"
    bad.write_bytes(b"\xff\xfe\x00garbage")
    proc = main("--config", str(bad), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "not UTF-8" in last_line(proc.stderr)


def test_unknown_section_and_wrong_type_in_file(main, tmp_path):
    cfg = tmp_path / "c.toml"
    cfg.write_text('[ppo]\nnum_minibatches = "four"\n')
    proc = main("--config", str(cfg), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    assert "ppo.num_minibatches = 'four' has the wrong type; expected int" in last_line(proc.stderr)
    cfg.write_text("[optim]\nlr = 1\n")
    proc = main("--config", str(cfg), "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "unknown config section [optim]" in last_line(proc.stderr)


def test_learning_rate_must_be_positive(main, tmp_path):
    proc = main("--config", "pendulum", "--set", "ppo.learning_rate=0", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "ppo.learning_rate = 0" in last_line(proc.stderr)


def test_unsupported_observation_space_is_named(main, tmp_path):
    # A Dict of Box and Discrete parts is accepted since the encoders; a key that cannot be encoded is refused.
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:TextKeyObs-v0", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = last_line(proc.stderr)
    assert "observation key 'note'" in line and "Text" in line and "env.obs_keys" in line
    assert not (tmp_path / "r").exists()


def test_missing_box2d_extra_gives_pip_command(main, tmp_path):
    blocker = tmp_path / "blocker"
    (blocker / "Box2D").mkdir(parents=True)
    (blocker / "Box2D" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--config", "lunarlander",
                           "--run-dir", str(tmp_path / "r")], capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 2
    assert 'pip install -e ".[box2d]"' in last_line(proc.stderr)


def test_missing_moviepy_extra_gives_pip_command(main, tmp_path):
    run = tmp_path / "run"
    assert main("--config", "pendulum", "--total-timesteps", "64", *TINY, "--run-dir", str(run)).returncode == 0
    blocker = tmp_path / "blocker"
    (blocker / "moviepy").mkdir(parents=True)
    (blocker / "moviepy" / "__init__.py").write_text("raise ImportError('blocked for the test')\n")
    env = {**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{ROOT}"}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "eval", str(run), "--video"],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert proc.returncode == 2
    assert 'pip install -e ".[video]"' in last_line(proc.stderr)


def test_resume_refuses_other_flags(main, tmp_path):
    proc = main("--resume", str(tmp_path), "--seed", "3")
    assert proc.returncode == 2 and "drop --seed" in last_line(proc.stderr)


# ----------------------------------------------------------------------------- checkpoints
def test_checkpoint_round_trip_and_corruption(tmp_path):
    state = {"model": {"w": torch.randn(3, 2)}, "update": 7, "generator": torch.Generator().get_state()}
    path = save_checkpoint(tmp_path / "c.pt", state)
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind
    loaded = load_checkpoint(path)
    assert loaded["update"] == 7 and torch.equal(loaded["model"]["w"], state["model"]["w"])
    assert torch.equal(loaded["generator"], state["generator"]) and loaded["format_version"] == 1
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    with pytest.raises(ConfigError, match="truncated or corrupt"):
        load_checkpoint(path)


def test_a_file_that_is_no_checkpoint_is_named_as_such(tmp_path):
    run = tmp_path / "run"
    (run / "checkpoints").mkdir(parents=True)
    (run / "config.toml").write_text("[env]\n")
    (run / "metrics.csv").write_text("update\n")
    (run / "notes").write_text("text")
    (run / "checkpoints" / "ckpt_000000000064.pt.tmp").write_bytes(b"PK\x03\x04 cut short")
    for name, kind in [("config.toml", "a TOML file"), ("metrics.csv", "a CSV file"), ("notes", "not a torch zip file"),
                       ("checkpoints/ckpt_000000000064.pt.tmp", "a zip file torch cannot load")]:
        with pytest.raises(ConfigError) as info:
            load_checkpoint(run / name)
        assert str(info.value) == (f"{run / name} is not a checkpoint ({kind}); expected a run dir or a checkpoint "
                                   f"file (RUN_DIR/checkpoints/ckpt_*.pt), e.g. {run}")
    (tmp_path / "elsewhere.json").write_text("{}")
    with pytest.raises(ConfigError, match=r"\(a JSON file\); expected a run dir or a checkpoint file "
                                          r"\(RUN_DIR/checkpoints/ckpt_\*\.pt\)$"):
        load_checkpoint(tmp_path / "elsewhere.json")


def test_corrupt_checkpoint_named_by_eval_or_resume_exits_2(main, tmp_path):
    run = tmp_path / "run"
    assert main("--config", "pendulum", "--total-timesteps", "64", *TINY, "--run-dir", str(run)).returncode == 0
    # a file of the run that is not a checkpoint is named as such, not as a corrupt checkpoint
    for args in (["eval", str(run / "config.toml")], ["export", str(run / "metrics.csv")]):
        proc = main(*args)
        assert proc.returncode == 2, args
        assert last_line(proc.stderr).endswith(f"is not a checkpoint ({'a TOML' if 'eval' in args else 'a CSV'} "
                                               f"file); expected a run dir or a checkpoint file "
                                               f"(RUN_DIR/checkpoints/ckpt_*.pt), e.g. {run}")
        assert "truncated or corrupt" not in proc.stderr and "Traceback" not in proc.stderr
    (ckpt,) = (run / "checkpoints").glob("ckpt_*.pt")
    ckpt.write_bytes(b"not a checkpoint at all")
    for args in (["eval", str(ckpt)], ["eval", str(run)], ["--resume", str(run)]):
        proc = main(*args)
        assert proc.returncode == 2, args
        assert "truncated or corrupt" in last_line(proc.stderr) and "Traceback" not in proc.stderr


def test_retention_keeps_last_k_and_best(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "pendulum", "--total-timesteps", "384", *TINY, "--set", "run.checkpoint_every=1",
                "--set", "run.keep_checkpoints=2", "--set", "run.eval_every=2", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    names = sorted(p.name for p in (run / "checkpoints").glob("*.pt"))
    assert names == ["best.pt", "ckpt_000000000320.pt", "ckpt_000000000384.pt"]
    best = load_checkpoint(run / "checkpoints" / "best.pt")
    assert best["best_eval"] is not None and best["env_steps"] in (128, 256)
    versions = json.loads((run / "versions.json").read_text())
    assert versions["torch"] == torch.__version__ and "gymnasium" in versions and "numpy" in versions
    assert "git_commit" in versions
    rows = (run / "metrics.csv").read_text().splitlines()
    assert rows[0].endswith("eval_return") and rows[2].split(",")[-1] != ""  # eval at update 2 is logged


# ----------------------------------------------------------------------------- resume
def _cfg(total, **run):
    return config_from_dict({"env": {"num_envs": 2}, "ppo": {"num_steps": 32, "num_minibatches": 2,
                                                            "update_epochs": 2, "anneal_lr": True},
                             "run": {"total_timesteps": total, "eval_episodes": 2, "device": "cpu", **run}})


def test_resume_restores_everything_but_the_envs(tmp_path):
    first = Trainer(_cfg(128), tmp_path / "run")
    first.train()
    saved = first.state_dict()
    again = Trainer(_cfg(128), tmp_path / "other")
    again.load_state_dict(load_checkpoint(next((tmp_path / "run" / "checkpoints").glob("ckpt_*.pt"))))
    restored = again.state_dict()
    assert restored["update"] == saved["update"] == 2 and restored["env_steps"] == saved["env_steps"] == 128
    assert restored["train_seconds"] == saved["train_seconds"]
    assert torch.equal(restored["generator"], saved["generator"])
    for k, v in saved["model"].items():
        assert torch.equal(restored["model"][k], v), k
    s_opt, r_opt = saved["optimizer"], restored["optimizer"]
    assert s_opt["param_groups"] == r_opt["param_groups"]  # includes the annealed learning rate
    for i, st in s_opt["state"].items():
        for key in ("step", "exp_avg", "exp_avg_sq"):
            assert torch.equal(r_opt["state"][i][key], st[key]), (i, key)


def test_resume_continues_counters_and_schedule(tmp_path, main):
    run = tmp_path / "run"
    proc = main("--config", "pendulum", "--total-timesteps", "128", *TINY, "--set", "ppo.anneal_lr=true",
                "--set", "ppo.learning_rate=1e-3", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr
    summary = resume(run, total_timesteps=256).summary
    assert summary["env_steps"] == 256 and summary["updates"] == 4
    rows = (run / "metrics.csv").read_text().splitlines()
    assert [r.split(",")[0] for r in rows] == ["update", "1", "2", "3", "4"]
    # anneal over the new total: update 2 of 4 runs at half the rate
    assert float(rows[3].split(",")[4]) == pytest.approx(1e-3 * 0.5)
    # two resumes from the same checkpoint are identical
    import shutil
    shutil.copytree(run, tmp_path / "copy")
    a = resume(run, total_timesteps=320).summary
    b = resume(tmp_path / "copy", total_timesteps=320).summary
    sa = torch.load(a["checkpoint"], weights_only=True)["model"]
    sb = torch.load(b["checkpoint"], weights_only=True)["model"]
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_resume_of_a_finished_run_says_so_and_how_to_extend_it_and_changes_nothing(tmp_path, main):
    """It used to re-save the last checkpoint, evaluate again and reprint a summary without a word (issue 39)."""
    run = tmp_path / "run"
    first = main("--config", "pendulum", "--total-timesteps", "128", *TINY, "--run-dir", str(run))
    assert first.returncode == 0, first.stderr[-2000:]
    files = {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()}
    again = main("--resume", str(run))
    assert again.returncode == 0, again.stderr[-2000:]
    assert last_line(again.stderr) == (f"{run} already finished: it trained 128 env steps (2 updates) of "
                                       "run.total_timesteps = 128; to train it further, add --total-timesteps N "
                                       "with N > 128")
    assert json.loads(last_line(again.stdout)) == json.loads(last_line(first.stdout))
    assert {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in run.rglob("*") if p.is_file()} == files
    longer = main("--resume", str(run), "--total-timesteps", "192")
    assert longer.returncode == 0 and json.loads(last_line(longer.stdout))["env_steps"] == 192, longer.stderr[-2000:]
    assert "already finished" not in longer.stderr


# ----------------------------------------------------------------------------- signals and failures
@pytest.mark.parametrize(("sig", "code"), [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_saves_checkpoint_and_summary(tmp_path, sig, code):
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "--config", "pendulum", "--run-dir", str(run),
                             "--total-timesteps", "10000000"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=env, cwd=ROOT)
    deadline = time.time() + 120
    while time.time() < deadline and not ((run / "metrics.csv").exists()
                                          and len((run / "metrics.csv").read_text().splitlines()) >= 2):
        time.sleep(0.2)
    proc.send_signal(sig)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, err[-2000:]
    summary = json.loads(last_line(out))
    assert summary["interrupted"] is True and summary["env_steps"] >= 3200
    assert json.loads((run / "summary.json").read_text()) == summary
    assert "checkpoint saved to" in err and "Traceback" not in err
    state = load_checkpoint(summary["checkpoint"])
    assert state["env_steps"] == summary["env_steps"]


@pytest.mark.parametrize(("env_id", "needle"), [("Raising-v0", "simulated physics blow-up"),
                                                ("NaNReward-v0", "non-finite")])
def test_training_failure_exits_1_and_keeps_the_last_good_checkpoint(main, tmp_path, env_id, needle):
    run = tmp_path / "run"
    proc = main("--config", "pendulum", "--set", f"env.id={CUSTOM}:{env_id}", *TINY,
                "--set", "run.checkpoint_every=1", "--total-timesteps", "100000", "--run-dir", str(run))
    assert proc.returncode == 1
    assert needle in last_line(proc.stderr) and "Traceback" not in proc.stderr
    ckpts = sorted((run / "checkpoints").glob("ckpt_*.pt"))
    state = load_checkpoint(ckpts[-1])
    assert all(torch.isfinite(v).all() for v in state["model"].values())
    if env_id == "Raising-v0":
        assert state["env_steps"] == 256  # the env raises at its 150th step; rollouts of 32 steps x 2 envs


# ----------------------------------------------------------------------------- eval, policy API, plot
def test_eval_command_and_policy_api(main, tmp_path):
    run = tmp_path / "run"
    assert main("--config", "pendulum", "--total-timesteps", "64", *TINY, "--run-dir", str(run)).returncode == 0
    summary_before = (run / "summary.json").read_text()
    proc = main("eval", str(run), "--episodes", "3")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(last_line(proc.stdout))
    assert result["eval_episodes"] == 3 and result["env_steps"] == 64 and result["env_id"] == "Pendulum-v1"
    assert json.loads((run / "checkpoints" / "eval.json").read_text()) == result
    assert (run / "summary.json").read_text() == summary_before
    policy = load_policy(run)
    import gymnasium as gym
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    action = policy(obs)
    assert action.shape == (1,) and env.action_space.contains(action.astype("float32"))
    assert policy(obs[None].repeat(4, 0)).shape == (4, 1)
    agent, config, _ = load_agent(run)
    assert config.env.id == "Pendulum-v1" and not agent.training


def test_eval_video_writes_an_mp4(main, tmp_path):
    run = tmp_path / "run"
    assert main("--config", "pendulum", "--total-timesteps", "64", *TINY, "--run-dir", str(run)).returncode == 0
    proc = main("eval", str(run), "--episodes", "1", "--video")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(last_line(proc.stdout))
    (video,) = result["videos"]
    assert result["video_episodes"] == 1 and video.endswith("-episode-0.mp4")
    data = open(video, "rb").read()
    assert len(data) > 1000 and data[4:8] == b"ftyp"  # an MP4 container
    # the first N evaluation episodes, one mp4 each; --video-episodes alone implies --video
    proc = main("eval", str(run), "--episodes", "3", "--video-episodes", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(last_line(proc.stdout))
    assert result["eval_episodes"] == 3 and result["video_episodes"] == 2
    stem = Path(result["checkpoint"]).stem
    assert [Path(v).name for v in result["videos"]] == [f"{stem}-episode-{i}.mp4" for i in range(2)]
    for path in result["videos"]:
        assert open(path, "rb").read()[4:8] == b"ftyp"
    assert sorted(p.name for p in Path(video).parent.iterdir()) == [Path(v).name for v in result["videos"]]
    assert json.loads((Path(video).parent.parent / "eval.json").read_text()) == result
    proc = main("eval", str(run), "--episodes", "2", "--video-episodes", "3")
    assert proc.returncode == 2 and last_line(proc.stderr) == (
        "error: --video-episodes 3 must be from 1 to --episodes (2): the videos are of the first evaluation episodes")


def test_plot_writes_png(main, tmp_path):
    runs = []
    for seed in (0, 1):
        run = tmp_path / f"run{seed}"
        assert main("--config", "pendulum", "--total-timesteps", "640", *TINY, "--set", "ppo.num_steps=50",
                    "--seed", str(seed), "--run-dir", str(run)).returncode == 0
        runs.append(str(run))
    out = tmp_path / "curve.png"
    proc = main("plot", *runs, "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
