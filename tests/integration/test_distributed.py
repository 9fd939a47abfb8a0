"""Data parallelism with torch.distributed (gloo) on this machine, through torchrun: one node of two ranks, and
two nodes of one rank each (a node killed in the middle of a run, and its resume)."""

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT


def torchrun(*args: str, cwd=ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout)


@pytest.mark.parametrize("variant", [("lstm",), ("none", "compile")], ids=["lstm", "compile"])
def test_parameters_identical_across_ranks_after_an_update(variant):
    """A recurrent update, and a compiled one (advantages normalised over ranks outside the graph, gradients
    averaged between the compiled backward and the step). The feed-forward eager update is the two-node test's
    one-node run below."""
    proc = torchrun(str(ROOT / "tests" / "integration" / "dist_worker.py"), *variant)
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


# ----------------------------------------------------------------------------- two nodes on this machine
# Each node is a torchrun agent of its own (--nnodes 2, c10d rendezvous on 127.0.0.1), as on two machines. Node 0
# starts first and hosts the rendezvous; its local address sorts first, so it holds rank 0 (c10d orders nodes
# by address, then process id).


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def listening(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
        return True
    except OSError:
        return False


def start_nodes(args: list[str], cwd, env1: dict | None = None) -> tuple[subprocess.Popen, subprocess.Popen]:
    """Start node 0, wait for its rendezvous, start node 1 (with ``env1`` added to its environment)."""
    port = free_port()
    nodes = []
    for rank in (0, 1):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1", **((env1 or {}) if rank else {})}
        command = [sys.executable, "-m", "torch.distributed.run", "--nnodes", "2", "--node-rank", str(rank),
                   "--nproc-per-node", "1", "--rdzv-backend", "c10d", "--rdzv-endpoint", f"127.0.0.1:{port}",
                   "--rdzv-id", "two-nodes", "--local-addr", f"127.0.0.{rank + 1}", *args]
        nodes.append(subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd,
                                      env=env, start_new_session=True))
        deadline = time.time() + 120
        while rank == 0 and not listening(port):
            assert nodes[0].poll() is None and time.time() < deadline, "node 0's rendezvous did not start"
            time.sleep(0.05)
    return nodes[0], nodes[1]


def test_two_nodes_give_identical_parameters_on_every_rank_and_the_results_of_one_node():
    node0, node1 = start_nodes([str(ROOT / "tests" / "integration" / "dist_worker.py")], ROOT)
    out0, err0 = node0.communicate(timeout=300)
    _, err1 = node1.communicate(timeout=60)
    assert node0.returncode == 0 and node1.returncode == 0, err0[-2000:] + err1[-2000:]
    one_node = torchrun(str(ROOT / "tests" / "integration" / "dist_worker.py"))
    assert one_node.returncode == 0, one_node.stderr[-3000:]
    two_nodes = re.search(r"IDENTICAL world_size=2 .* digest=(\w+)", out0)
    assert two_nodes, out0  # parameters and normaliser statistics identical on both ranks
    assert two_nodes.group(1) == re.search(r"digest=(\w+)", one_node.stdout).group(1)  # and as on one node


def test_a_killed_node_ends_the_run_in_one_line_with_its_checkpoint_and_resume_on_two_nodes_continues(tmp_path):
    args = [str(ROOT / "main.py"), "--config", "cartpole", "--total-timesteps", "4096", "--set", "env.num_envs=4",
            "--set", "ppo.num_steps=64", "--set", "run.checkpoint_every=2", "--set", "run.eval_episodes=2"]
    # node 1's rank dies as under kill -9 half-way through the rollout of update 5; the test then kills its agent
    node0, node1 = start_nodes([*args, "--run-dir", "run"], tmp_path, {"PPO_CORE_KILL_AT": "rollout:5"})
    while True:
        workers = Path(f"/proc/{node1.pid}/task/{node1.pid}/children").read_text().split()
        if workers or node1.poll() is not None:
            break
        time.sleep(0.05)
    while any(Path(f"/proc/{pid}").exists() for pid in workers):
        time.sleep(0.02)
    lost = time.time()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(node1.pid, signal.SIGKILL)  # the rest of the node: its agent
    node1.communicate(timeout=30)
    _, err = node0.communicate(timeout=120)
    assert time.time() - lost < 60, "node 0 did not end within 60 s of losing node 1"
    assert node0.returncode != 0
    ours = [line for line in err.splitlines() if line.startswith("error: ")]
    checkpoint = Path("run") / "checkpoints" / "ckpt_000000002048.pt"  # after update 4 of 512 steps
    assert len(ours) == 1 and "lost a node" in ours[0], err[-3000:]
    assert f"the last good checkpoint is {checkpoint}" in ours[0] and "--resume run " in ours[0]
    assert (tmp_path / checkpoint).is_file()

    node0, node1 = start_nodes([str(ROOT / "main.py"), "--resume", "run"], tmp_path)
    out, err = node0.communicate(timeout=300)
    assert node0.returncode == 0, err[-3000:]
    assert node1.communicate(timeout=60) and node1.returncode == 0
    summary = json.loads(out.strip().splitlines()[-1])
    assert summary["world_size"] == 2 and summary["env_steps"] == 4096 and summary["interrupted"] is False
    rows = (tmp_path / "run" / "metrics.csv").read_text().splitlines()[1:]
    assert [int(row.split(",")[0]) for row in rows] == list(range(1, 9))  # each update once, 5 to 8 after the resume
