"""Data parallelism with torch.distributed (gloo) on this machine, through torchrun."""

import json
import os
import subprocess
import sys

import pytest

from .conftest import ROOT


def torchrun(*args: str, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize("recurrent", ["none", "lstm"])
def test_parameters_identical_across_ranks_after_an_update(recurrent):
    proc = torchrun(str(ROOT / "tests" / "integration" / "dist_worker.py"), recurrent)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "IDENTICAL world_size=2" in proc.stdout


def test_torchrun_main_writes_one_run_dir_with_world_size_2(tmp_path):
    # default run dirs are relative to the working directory: run from tmp_path
    proc = torchrun(str(ROOT / "main.py"), "--config", "cartpole.toml", "--total-timesteps", "20000",
                    "--set", "run.eval_episodes=3", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1  # only rank 0 prints the summary
    summary = lines[0]
    assert summary["world_size"] == 2
    assert summary["env_steps"] == 20480  # 20,000 global steps round up to whole rollouts of 2 x 16 x 128
    run_dirs = list((tmp_path / "runs").iterdir())
    assert len(run_dirs) == 1
    assert json.loads((run_dirs[0] / "summary.json").read_text()) == summary
    assert len((run_dirs[0] / "metrics.csv").read_text().splitlines()) == 1 + 5  # header + 5 updates, rank 0 only
