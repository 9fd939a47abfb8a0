"""``run.compile``: the update's loss and gradient clip through torch.compile (shell/ppo.py).

A compiled update must equal an eager one from identical inputs within a float tolerance (whole runs
diverge after the first differing bit), build no graph after its warm-up (the learning rate is a
tensor), leave checkpoints without ``_orig_mod.``, resume and export; a recurrent policy and a machine
without a C++ compiler stay eager with one warning line; a run without it never imports dynamo. Under torchrun:
test_distributed.py's ``compile`` case."""

from __future__ import annotations

import copy
import os
import subprocess
import sys

import pytest
import torch

import shell.ppo
from shell.api import resume, train
from shell.config import load_config
from shell.export import export_policy
from shell.runner import Trainer

from .conftest import ROOT
from .test_multiagent import MIXED
from .test_multiagent import config as multiagent_config

PENDULUM = {"env.id": "Pendulum-v1", "env.num_envs": 4, "ppo.num_steps": 32, "ppo.num_minibatches": 2,
            "ppo.update_epochs": 2, "policy.hidden_sizes": [16], "run.total_timesteps": 384,
            "run.eval_episodes": 0, "run.loggers": [], "run.compile": True}


def graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters
    return int(counters["stats"]["unique_graphs"])


def eager_then_compiled(trainer: Trainer) -> tuple[list[dict], list[dict]]:
    """From one collected rollout: every lane's eager update, then, from the same weights, optimiser state and
    generator state, its compiled update. Returns each one's parameters and metrics per lane."""
    lanes = list(trainer.lanes.lanes.values())
    start = [(copy.deepcopy(lane.agent.state_dict()), copy.deepcopy(lane.ppo.optimizer.state_dict()))
             for lane in lanes]
    generator = trainer.generator.get_state()
    results = []
    for mode in ("eager", "compiled"):
        trainer.generator.set_state(generator)
        before = graphs()
        out = []
        for lane, (weights, optim) in zip(lanes, start, strict=True):
            lane.agent.load_state_dict(weights)
            lane.ppo.optimizer.load_state_dict(copy.deepcopy(optim))
            compiled = lane.ppo.compiled
            assert compiled is not None
            if mode == "eager":
                lane.ppo.compiled = None
            metrics = lane.ppo.update(lane.storage)
            lane.ppo.compiled = compiled
            out.append({"params": {k: v.detach().clone() for k, v in lane.agent.state_dict().items()},
                        "metrics": {k: float(v) for k, v in metrics.items()}})
        results.append(out)
    assert graphs() > before  # the compiled pass ran compiled (each test here compiles policies of its own)
    return results[0], results[1]


def assert_close(eager: list[dict], compiled: list[dict]) -> None:
    for e, c in zip(eager, compiled, strict=True):
        assert e["params"].keys() == c["params"].keys()
        for key in e["params"]:
            torch.testing.assert_close(c["params"][key], e["params"][key], rtol=1e-4, atol=1e-5, msg=key)
        assert c["metrics"] == pytest.approx(e["metrics"], rel=1e-4, abs=1e-5)


def test_a_compiled_update_equals_an_eager_one_and_builds_no_graph_after_warm_up(tmp_path):
    config = load_config(None, {**PENDULUM, "ppo.anneal_lr": True, "ppo.rpo_alpha": 0.5})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    trainer.collect(trainer.env.reset(seed=0))
    eager, compiled = eager_then_compiled(trainer)
    assert_close(eager, compiled)
    ppo = trainer.lanes.only.ppo
    warm = graphs()
    for lr in (2e-4, 1e-4):  # annealing fills the tensor in place: no recompilation
        ppo.set_learning_rate(lr)
        assert isinstance(ppo.optimizer.lr, torch.Tensor) and float(ppo.optimizer.lr) == pytest.approx(lr)
        trainer.collect(trainer.env.reset(seed=1))
        ppo.update(trainer.lanes.only.storage)
    assert graphs() == warm
    # the policy is the plain module: no compile wrapper's prefix in its keys or the checkpoint's
    assert not any("_orig_mod" in key for key in trainer.state_dict()["model"])
    trainer.env.close()
    # a second run of the config in this process reuses the graphs (a sweep's trials do not recompile)
    again = Trainer(config, tmp_path / "again", progress=False)
    again.collect(again.env.reset(seed=0))
    again.lanes.only.ppo.update(again.lanes.only.storage)
    assert graphs() == warm
    again.env.close()


def test_compiled_updates_with_masks_and_with_lanes_equal_eager_ones(tmp_path):
    masked = load_config(None, {**{k: v for k, v in PENDULUM.items() if k != "env.id"},
                                "env.id": "tests.integration.mask_envs:MaskedPick-v0"})
    trainer = Trainer(masked, tmp_path / "masked", progress=False)
    trainer.collect(trainer.env.reset(seed=0))
    assert trainer.lanes.only.storage.action_masks is not None
    assert_close(*eager_then_compiled(trainer))
    trainer.env.close()
    # two groups of other spaces, each its own compiled update; agents that leave make minibatches of other sizes
    lanes = multiagent_config(**MIXED, **{"run.compile": True})
    trainer = Trainer(lanes, tmp_path / "lanes", progress=False)
    trainer.collect(trainer.env.reset(seed=0))
    assert trainer.lanes.several
    assert_close(*eager_then_compiled(trainer))
    trainer.env.close()


def test_minibatches_of_a_new_size_compile_one_graph_and_then_none(tmp_path):
    """Where the rows vary in number (a turn-based game's learner against opponents, agents that leave), so do the
    minibatches: the second size makes dynamo's batch dimension symbolic, and no later size builds a graph (a size
    that a check hashed into a set stayed fixed: a graph per size, past dynamo's recompile limit)."""
    config = load_config("tictactoe", {"env.num_envs": 8, "ppo.num_steps": 16, "ppo.num_minibatches": 2,
                                       "ppo.update_epochs": 1, "policy.hidden_sizes": [16], "run.eval_episodes": 0,
                                       "run.loggers": [], "run.compile": True})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    lane = trainer.lanes.only
    rows = trainer.env.reset(seed=0)
    sizes, built = [], []
    for _ in range(6):
        rows, _ = trainer.collect(rows)
        sizes.append(int(lane.storage.valid.sum()))
        before = graphs()
        lane.ppo.update(lane.storage)
        built.append(graphs() - before)
    trainer.env.close()
    assert lane.ppo.compiled is not None
    assert len(set(sizes)) >= 4, sizes  # the opponents' rows leave a different count each rollout
    # after the first size one graph at most (the first may come from dynamo's cache: an earlier test's policy of
    # the same shapes in this process)
    assert sum(built[1:]) <= 1, (sizes, built)


def test_a_compiled_run_checkpoints_resumes_and_exports_without_orig_mod(tmp_path):
    run = tmp_path / "run"
    config = load_config(None, {**PENDULUM, "run.total_timesteps": 256, "run.checkpoint_every": 1})
    train(config=config, run_dir=run, progress=False)
    checkpoint = torch.load(run / "checkpoints" / "ckpt_000000000256.pt", weights_only=False)
    assert not any("_orig_mod" in key for key in checkpoint["model"])
    summary = resume(run, total_timesteps=384, progress=False).summary
    assert summary["env_steps"] == 384
    with open(run / "metrics.csv") as f:
        assert [line.split(",")[0] for line in f.read().splitlines()[1:]] == ["1", "2", "3"]
    exported = export_policy(run, "pt2", tmp_path / "policy.pt2")  # checked against the live policy on export
    assert exported.path.is_file()


def test_a_recurrent_policy_stays_eager_with_one_warning_line(tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(shell.ppo, "_warned", set())  # the warning is once per process
    config = load_config(None, {**PENDULUM, "policy.recurrent": "lstm", "run.total_timesteps": 128})
    trainer = Trainer(config, tmp_path / "run", progress=False)
    assert trainer.lanes.only.ppo.compiled is None
    trainer.env.close()
    err = capfd.readouterr().err
    lines = [line for line in err.splitlines() if "run.compile" in line]
    assert lines == ["warning: run.compile: a recurrent policy's sequence minibatches stay eager "
                     f"({shell.ppo.REFUSED_WHY})"]
    summary = train(config=config, run_dir=tmp_path / "trained", progress=False).summary
    assert summary["env_steps"] == 128


def test_without_a_cpp_compiler_the_run_falls_back_to_eager_with_one_warning_line(tmp_path):
    """Inductor's own check (cpp_builder.get_cpp_compiler, which takes CXX) finds no compiler."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CXX": str(tmp_path / "no-such-g++")}
    proc = subprocess.run([sys.executable, str(ROOT / "main.py"), "--config", "pendulum", "--total-timesteps", "64",
                           "--run-dir", str(tmp_path / "run"), "--set", "run.compile=true",
                           "--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set", "run.eval_episodes=0",
                           "--set", "run.loggers=[]"], capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    warnings = [line for line in proc.stderr.splitlines() if "run.compile" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: run.compile: no C++ compiler for torch.compile")
    assert "Traceback" not in proc.stderr


def test_a_run_without_compile_never_imports_dynamo_or_inductor(tmp_path):
    code = ("import sys\nfrom shell.api import train\n"
            f"train(config='pendulum', run_dir={str(tmp_path / 'run')!r}, progress=False, overrides="
            "{'run.total_timesteps': 64, 'env.num_envs': 2, 'ppo.num_steps': 32, 'run.eval_episodes': 2, "
            "'run.eval_max_episode_steps': 20, 'run.loggers': []})\n"
            "loaded = [m for m in ('torch._dynamo', 'torch._inductor') if m in sys.modules]\n"
            "assert not loaded, loaded\n")
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                   timeout=300)
