"""Worker processes end with their parent, also after ``kill -9`` (shell.workers), and the pool's answers; ranks
under torchrun end with their launcher (shell.distributed.end_with_launcher), tune workers with ``tune``.

A training run whose envs step in worker processes (PettingZoo copies, gymnasium's AsyncVectorEnv, gymnasium
sub-envs in shares) is
killed with SIGKILL: within 10 s no process it started may be alive. Before shell.workers, an async
simple-spread run left its workers alive forever (each held the parent's end of its own pipe). An async
gymnasium run of 128 envs left about half of them: gymnasium's workers end in a chain once the pipes
close (each holds the parent's ends of the pipes of those forked before it), and the chain stops at the
first worker whose error report on the way out does not fit into the error queue's pipe, which only the
dead parent read (fewer workers fit when stderr is an unread pipe too: each writes a traceback there).

Linux only: the process tree is read from /proc.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from shell.errors import TrainingError
from shell.workers import WorkerPool

from .conftest import ROOT

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads the process tree from /proc")

GRACE = 10.0  # seconds the workers have to end after their parent is killed


# ----------------------------------------------------------------------------- the process tree from /proc
def _stat(pid: int) -> list[str] | None:
    """Fields 3.. of /proc/PID/stat (state, ppid, ...), None for no such process."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def descendants(root: int) -> dict[int, str]:
    """Every process below ``root``: ``{pid: start time}`` (the start time tells a reused pid apart)."""
    parents: dict[int, int] = {}
    starts: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            fields = _stat(int(entry))
            if fields is not None:
                parents[int(entry)], starts[int(entry)] = int(fields[1]), fields[19]
    found: dict[int, str] = {}
    todo = [root]
    while todo:
        parent = todo.pop()
        for pid, ppid in parents.items():
            if ppid == parent and pid not in found:
                found[pid] = starts[pid]
                todo.append(pid)
    return found


def alive(processes: dict[int, str]) -> list[int]:
    """The processes of ``processes`` still running (a zombie has ended)."""
    out = []
    for pid, start in processes.items():
        fields = _stat(pid)
        if fields is not None and fields[19] == start and fields[0] not in ("Z", "X"):
            out.append(pid)
    return out


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.1)


def kill_and_check(proc: subprocess.Popen, started: dict[int, str]) -> None:
    """SIGKILL ``proc``; every process of ``started`` must end within GRACE seconds (the leftovers are killed
    here either way)."""
    try:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        deadline = time.monotonic() + GRACE
        while alive(started) and time.monotonic() < deadline:
            time.sleep(0.1)
        left = alive(started)
        assert not left, f"{len(left)} of the {len(started)} processes the killed one started are alive {GRACE} s on"
    finally:
        for pid in alive(started):
            os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- training runs, killed
def start_run(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "stderr", "w") as stderr:  # a file: a pipe would stay open as long as any worker lives
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), *args, "--total-timesteps", "100000000",
                                 "--run-dir", str(run)], stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
                                env=env, start_new_session=True)
    return proc, run


def training(proc: subprocess.Popen, run: Path) -> bool:
    """Whether the run has logged an update (its workers are up and stepping)."""
    assert proc.poll() is None, (run.parent / "stderr").read_text()[-3000:]
    path = run / "metrics.csv"
    return path.exists() and len(path.read_text().splitlines()) >= 2


RUNS = {
    # PettingZoo copies in this process and a shell.workers pool (one worker per further CPU)
    "pettingzoo": ("simple-spread", ["--set", "env.num_envs=4", "--set", "ppo.num_steps=8"]),
    # gymnasium's AsyncVectorEnv; 128 workers, enough to fill the error queue gymnasium's workers write on the way out
    "gymnasium": ("cartpole", ["--set", "env.num_envs=128", "--set", "ppo.num_steps=8"]),
    # gymnasium sub-envs in shares: this process and a shell.workers pool (shell/envs/shards.py)
    "gymnasium-shares": ("cartpole", ["--set", "env.num_envs=16", "--set", "ppo.num_steps=8", "--set", "env.shares=3"]),
}


@pytest.mark.parametrize("backend", list(RUNS))
def test_a_run_killed_with_sigkill_leaves_no_worker_alive(tmp_path, backend):
    if backend == "pettingzoo":
        pytest.importorskip("pettingzoo")
        pytest.importorskip("mpe2")
    config, extra = RUNS[backend]
    proc, run = start_run(tmp_path, "--config", config, "--set", 'env.vectorization_mode="async"', *extra)
    started: dict[int, str] = {}
    try:
        wait_for(lambda: training(proc, run), 120, "the first update")
        started = descendants(proc.pid)
        assert started, "the run started no worker process"
    finally:
        kill_and_check(proc, started)


# ----------------------------------------------------------------------------- the pool, in a killed parent
PARENT = textwrap.dedent("""
    import os, sys, threading, time
    from shell.workers import WorkerPool

    class Echo:
        def echo(self, x):
            return x

    def serve():
        return Echo()

    def start():
        pool = WorkerPool(serve, [()] * 3, name="test-pool")
        for i in range(3):
            pool.receive(i, RuntimeError, "start")
        return pool

    where, held = sys.argv[1], sys.argv[2] == "held"
    if where == "thread":  # started from another thread, which then ends: the pid watch, not the death signal
        pools = []
        thread = threading.Thread(target=lambda: pools.append(start()))
        thread.start()
        thread.join()
        pool = pools[0]
    else:
        pool = start()
    time.sleep(0.5)
    for i in range(3):  # the workers answer (those started from the ended thread too)
        pool.send(i, "echo", i)
        assert pool.receive(i, RuntimeError, "echo") == i
    if held:  # another process holds the parent's ends of the pipes (as a later fork would)
        if os.fork() == 0:
            time.sleep(60)
            os._exit(0)
    with open(sys.argv[3] + ".tmp", "w") as f:
        f.write(" ".join(str(p.pid) for p in pool.processes))
    os.replace(sys.argv[3] + ".tmp", sys.argv[3])
    time.sleep(300)
""")


@pytest.mark.parametrize(("where", "held"), [("main", ""), ("main", "held"), ("thread", "held")])
def test_pool_workers_end_when_their_parent_is_killed(tmp_path, where, held):
    """Three workers of a parent killed with SIGKILL end within 10 s: started from the main thread or from a
    thread that has ended since, and while another process still holds the parent's ends of their pipes (so
    that they cannot see the pipes end: the parent-death guard alone ends them)."""
    script, pids, log = tmp_path / "parent.py", tmp_path / "pids", tmp_path / "stderr"
    script.write_text(PARENT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(log, "w") as stderr:  # a file: a pipe would stay open as long as any worker lives
        proc = subprocess.Popen([sys.executable, str(script), where, held or "-", str(pids)],
                                stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path, env=env, start_new_session=True)
    started: dict[int, str] = {}
    others: dict[int, str] = {}
    try:
        def ready() -> bool:
            assert proc.poll() is None, log.read_text()[-3000:]
            return pids.exists()

        wait_for(ready, 60, "the pool")
        everything = descendants(proc.pid)
        workers = {int(pid) for pid in pids.read_text().split()}
        started = {pid: start for pid, start in everything.items() if pid in workers}
        others = {pid: start for pid, start in everything.items() if pid not in workers}
        assert len(started) == 3 and len(others) == bool(held)
        kill_and_check(proc, started)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in alive(started) + alive(others):
            os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- the pool's answers
class Calculator:
    def __init__(self, offset: int):
        self.offset = offset

    def add(self, x: int) -> int:
        return x + self.offset

    def fail(self) -> None:
        raise ValueError("no such move\nsecond line")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def exit(self) -> None:
        os._exit(3)


def calculator(offset: int) -> Calculator:
    if offset < 0:
        raise RuntimeError("negative offset")
    return Calculator(offset)


def test_pool_answers_in_order_and_raises_one_line_errors_of_the_callers_class():
    pool = WorkerPool(calculator, [(10,), (20,), (30,), (-1,)])
    try:
        for i in range(3):
            assert pool.receive(i, TrainingError, "start") is None
        with pytest.raises(TrainingError, match=r"^start: RuntimeError: negative offset$"):
            pool.receive(3, TrainingError, "start")
        for i in range(3):
            pool.send(i, "add", 1)
            pool.send(i, "add", 2)
        assert [[pool.receive(i, TrainingError, "add") for _ in range(2)] for i in range(3)] == [
            [11, 12], [21, 22], [31, 32]]
        pool.send(0, "fail")
        with pytest.raises(TrainingError, match=r"^env x raised: ValueError: no such move$"):
            pool.receive(0, TrainingError, "env x raised")
        pool.send(1, "exit")
        with pytest.raises(TrainingError, match=r"^step: a worker process ended \(exit code 3\)$"):
            pool.receive(1, TrainingError, "step")
        pool.processes[2].kill()
        pool.processes[2].join()
        pool.send(2, "add", 1)  # to a worker that has ended: reported by the receive
        with pytest.raises(TrainingError, match=r"^step: a worker process ended \(killed by SIGKILL\)$"):
            pool.receive(2, TrainingError, "step")
        pool.send(1, "add", 1)
        with pytest.raises(TrainingError, match="a worker process ended"):
            pool.receive(1, TrainingError, "step")
    finally:
        pool.close()
    assert not any(p.is_alive() for p in pool.processes)
    pool.close()  # twice is harmless


def test_close_kills_a_worker_that_does_not_answer_in_time():
    pool = WorkerPool(calculator, [(0,)])
    pool.receive(0, TrainingError, "start")
    pool.send(0, "sleep", 60)
    started = time.monotonic()
    pool.close(timeout=0.5)
    assert time.monotonic() - started < 5 and not pool.processes[0].is_alive()


class Closing:
    def __init__(self, marker: str):
        self.marker = marker

    def close(self) -> None:
        Path(self.marker).write_text("closed")


def test_close_closes_the_served_objects(tmp_path):
    markers = [tmp_path / f"worker{i}" for i in range(2)]
    pool = WorkerPool(Closing, [(str(m),) for m in markers])
    for i in range(2):
        pool.receive(i, TrainingError, "start")
    pool.close()
    assert [m.read_text() for m in markers] == ["closed", "closed"]
    assert [p.exitcode for p in pool.processes] == [0, 0]


def test_a_worker_ends_when_the_parent_closes_its_pipe():
    """Its own and its siblings' copies of the parent's ends are closed in the worker, so closing the parent's
    end (without a close request) is seen as the end of the pipe."""
    pool = WorkerPool(calculator, [(0,), (1,), (2,)])
    try:
        for i in range(3):
            pool.receive(i, TrainingError, "start")
        pool._pipes[0].close()
        pool.processes[0].join(timeout=10)
        assert pool.processes[0].exitcode == 0
        assert all(p.is_alive() for p in pool.processes[1:])
    finally:
        pool.close()


def test_a_pool_started_from_another_thread_answers():
    """Linux's parent-death signal comes when the starting *thread* ends: not used for such a pool."""
    pools: list[WorkerPool] = []

    def start() -> None:
        pools.append(WorkerPool(calculator, [(5,)]))
        pools[0].receive(0, TrainingError, "start")  # the worker's guard is in place while this thread lives

    thread = threading.Thread(target=start)
    thread.start()
    thread.join()
    pool = pools[0]
    try:
        time.sleep(0.5)  # the thread that started it has ended: the worker lives on
        pool.send(0, "add", 1)
        assert pool.receive(0, TrainingError, "add") == 6
    finally:
        pool.close()


# ----------------------------------------------------------------------------- a worker killed by the OS
@pytest.mark.parametrize("backend", list(RUNS))
def test_a_killed_worker_is_one_line_and_nothing_after_it(tmp_path, backend):
    """A worker process killed by the OS (SIGKILL, as the out-of-memory killer does) ends the run with exit 1 and
    one line saying that a worker ended and how; no traceback or warning from the other workers or from
    gymnasium's ``AsyncVectorEnv.__del__`` before or after it."""
    if backend == "pettingzoo":
        pytest.importorskip("pettingzoo")
        pytest.importorskip("mpe2")
    config, extra = RUNS[backend]
    shares = [arg for arg in extra if arg.startswith("env.shares")]
    proc, run = start_run(tmp_path, "--config", config, "--set", 'env.vectorization_mode="async"',
                          "--set", "env.num_envs=4", "--set", "ppo.num_steps=8", "--set", "run.torch_threads=1",
                          *[a for s in shares for a in ("--set", s)])
    started: dict[int, str] = {}
    try:
        wait_for(lambda: training(proc, run), 120, "the first update")
        started = descendants(proc.pid)
        workers = [pid for pid in started if _stat(pid) is not None and int(_stat(pid)[1]) == proc.pid]
        assert workers, "the run started no worker process"
        os.kill(workers[-1], signal.SIGKILL)
        assert proc.wait(timeout=60) == 1
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
        for pid in alive(started):
            os.kill(pid, signal.SIGKILL)
    # what is left once the progress bar's redraws (each after a carriage return) are taken out
    text = (tmp_path / "stderr").read_text()
    lines = [line for line in text.replace("\r", "\n").splitlines()
             if line.strip() and "step/s" not in line and not line.startswith("action masks: ")]  # the start-up line
    assert len(lines) == 1, text[-3000:]
    assert lines[0].startswith("error: ") and "a worker process ended (killed by SIGKILL)" in lines[0], lines
    assert "checkpoint" in lines[0]


# ----------------------------------------------------------------------------- ranks and tune workers, launcher killed
def start_torchrun(tmp_path: Path, *args: str) -> tuple[subprocess.Popen, Path]:
    """One node of two ranks training cartpole "forever" (``main.py ARGS`` under torchrun), stderr to a file."""
    run = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    with open(tmp_path / "stderr", "w") as stderr:
        proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
                                 str(ROOT / "main.py"), "--config", "cartpole", "--total-timesteps", "100000000",
                                 "--run-dir", str(run), *args], stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
                                env=env, start_new_session=True)
    return proc, run


def ours(text: str) -> list[str]:
    """The lines of a stderr that are not the progress bar's redraws (each after a carriage return)."""
    return [line for line in text.replace("\r", "\n").splitlines() if line.strip() and "step/s" not in line]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_ranks_end_when_their_torchrun_launcher_is_killed(tmp_path, mode):
    """torchrun starts each rank in a session of its own and does not take them with it: after a ``kill -9`` of
    torchrun both ranks trained on, re-parented to init. Now each ends within a second or so with one line, the
    same on both (the rank whose collective fails first, as the other has ended, says so too), and nothing after;
    the async env workers of each rank end with their rank."""
    proc, run = start_torchrun(tmp_path, "--set", f'env.vectorization_mode="{mode}"', "--set", "env.num_envs=4")
    started: dict[int, str] = {}
    try:
        wait_for(lambda: training(proc, run), 120, "the first update")
        started = descendants(proc.pid)
        ranks = [pid for pid in started if _stat(pid) is not None and int(_stat(pid)[1]) == proc.pid]
        assert len(ranks) == 2 and (len(started) > 2) == (mode == "async"), started  # async: and their workers
    finally:
        kill_and_check(proc, started)
    lines = ours((tmp_path / "stderr").read_text())
    gone = [line for line in lines if "torchrun launcher" in line]
    assert sorted(gone) == [f"error: the torchrun launcher (pid {proc.pid}) has ended, so rank {rank} of 2 stops here; "
                            "checkpoints already on disk are kept" for rank in (0, 1)], lines[-10:]
    assert lines[-2:] == gone, lines[-10:]  # nothing after them: no "lost a node", no traceback


RANK = textwrap.dedent("""
    import os, sys, time
    from shell.distributed import end_with_launcher

    assert not end_with_launcher(os.getppid())  # outside torchrun: nothing to watch
    os.environ.update(TORCHELASTIC_RUN_ID="test", RANK="1", WORLD_SIZE="2")
    assert end_with_launcher(os.getppid())
    open(sys.argv[1], "w").close()
    time.sleep(60)
    os._exit(0)
""")

REAPER = textwrap.dedent("""
    import ctypes, os, signal, subprocess, sys, time

    # PR_SET_CHILD_SUBREAPER: the rank, orphaned, becomes this process's child, so that its exit code can be read
    assert ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) == 0
    rank, ready = sys.argv[1], sys.argv[2]
    launcher = subprocess.Popen([sys.executable, "-c", "import subprocess, sys, time; "
                                 f"subprocess.Popen([sys.executable, '-c', {rank!r}, {ready!r}]); time.sleep(60)"])
    deadline = time.monotonic() + 60
    while not os.path.exists(ready):
        assert time.monotonic() < deadline and launcher.poll() is None
        time.sleep(0.05)
    launcher.kill()
    launcher.wait()
    killed = time.monotonic()
    pid, status = os.wait()  # the rank
    print(launcher.pid, os.waitstatus_to_exitcode(status), round(time.monotonic() - killed, 1))
""")


def test_a_rank_whose_launcher_ends_exits_129_with_one_line(tmp_path):
    """The rank's side of the test above, where its exit code can be read: a process between this one and the
    rank (the launcher) is killed; the rank, a child of this one's script from then on, ends with exit code 129."""
    script, ready = tmp_path / "reaper.py", tmp_path / "ready"
    script.write_text(REAPER)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("TORCHELASTIC_RUN_ID", None)
    proc = subprocess.run([sys.executable, str(script), RANK, str(ready)], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    launcher, code, seconds = proc.stdout.split()
    assert int(code) == 129 and float(seconds) < 5, proc.stdout
    assert ours(proc.stderr) == [f"error: the torchrun launcher (pid {launcher}) has ended, so rank 1 of 2 stops here; "
                                 "checkpoints already on disk are kept"]


@pytest.mark.parametrize("victim", [0, 1], ids=["node0-rendezvous-host", "node1"])
def test_a_node_whose_launcher_is_killed_ends_and_so_does_the_other_node(tmp_path, victim):
    """Two nodes of one rank each (two torchrun launchers on this machine, as in test_distributed.py); one node's
    launcher is killed with SIGKILL. Its rank ends within 10 s with one line; the other node's rank then loses it
    at its next collective (one "lost a node" line, exit 1), and that node's launcher ends too."""
    from .test_distributed import start_nodes

    nodes = start_nodes([str(ROOT / "main.py"), "--config", "cartpole", "--total-timesteps", "100000000",
                         "--run-dir", "run"], tmp_path)
    other = nodes[1 - victim]
    started: list[dict[int, str]] = [{}, {}]
    try:
        def training() -> bool:  # rank 0, on node 0, writes the run dir
            assert all(node.poll() is None for node in nodes), [node.returncode for node in nodes]
            path = tmp_path / "run" / "metrics.csv"
            return path.exists() and len(path.read_text().splitlines()) >= 2

        wait_for(training, 120, "the first update")
        started = [descendants(node.pid) for node in nodes]
        assert [len(ranks) for ranks in started] == [1, 1], started
        kill_and_check(nodes[victim], started[victim])
        other.wait(timeout=60)
        assert other.returncode != 0 and not alive(started[1 - victim])
    finally:
        for node in nodes:
            if node.poll() is None:
                node.kill()
        for ranks in started:
            for pid in alive(ranks):
                os.kill(pid, signal.SIGKILL)
    killed_err, other_err = nodes[victim].communicate(timeout=30)[1], other.communicate(timeout=30)[1]
    assert [line for line in ours(killed_err) if line.startswith("error: ")] == [
        f"error: the torchrun launcher (pid {nodes[victim].pid}) has ended, so rank {victim} of 2 stops here; "
        "checkpoints already on disk are kept"], killed_err[-3000:]
    lost = [line for line in ours(other_err) if line.startswith("error: ")]
    assert len(lost) == 1 and "lost a node" in lost[0], other_err[-3000:]


def test_tune_workers_end_when_the_tune_process_is_killed(tmp_path):
    """``tune --jobs 2`` killed with SIGKILL, its workers not: each worker sees its parent gone at the trainer's
    next update, stops its trial as after Ctrl-C (FAIL, queued again) and ends."""
    pytest.importorskip("optuna")
    study = tmp_path / "study"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with open(tmp_path / "stderr", "w") as stderr:  # the workers' one line per trial comes here too
        proc = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "tune", "--config", "cartpole", "--trials", "4",
                                 "--jobs", "2", "--seeds", "0", "--total-timesteps", "100000000", "--set",
                                 "env.num_envs=4", "--set", "ppo.num_steps=64", "--study-dir", str(study)],
                                stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path, env=env, start_new_session=True)
    started: dict[int, str] = {}
    try:
        def training() -> bool:  # both workers in the middle of a trial
            assert proc.poll() is None, (tmp_path / "stderr").read_text()[-3000:]
            return sum(len(m.read_text().splitlines()) >= 2 for m in study.glob("trials/*/s0/metrics.csv")) == 2

        wait_for(training, 120, "two trials training")
        started = descendants(proc.pid)
        assert len(started) == 2, started
    finally:
        kill_and_check(proc, started)
    text = (tmp_path / "stderr").read_text()
    assert text.count("FAIL (interrupted by SIGTERM); it is queued to run again") == 2, text[-3000:]


def test_a_signal_to_a_rank_whose_launcher_has_ended_ends_it_as_the_watch_does():
    """A torchrun rank may get a SIGTERM as its launcher dies (before its watch looks): it ends with the launcher's
    line and exit 129, not as a stop request that would save a checkpoint after the launcher is gone (once seen in
    CI under load: "interrupted by SIGTERM: checkpoint saved ...")."""
    code = ("import os, signal, time\n"
            "import shell.distributed as d\n"
            "from shell.cli import install_signal_handlers\n"
            "from shell.stop import StopRequest\n"
            "d._launcher = os.getppid() + 1  # a launcher that is not this process's parent: it has ended\n"
            "install_signal_handlers(StopRequest())\n"
            "os.kill(os.getpid(), signal.SIGTERM)\n"
            "time.sleep(10)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT), "RANK": "1", "WORLD_SIZE": "2"})
    assert proc.returncode == 129, proc.stderr[-2000:]
    assert proc.stderr.strip().splitlines()[-1].startswith("error: the torchrun launcher (pid "), proc.stderr
    assert "rank 1 of 2 stops here" in proc.stderr


SIGNALLED_RANK = ("import os, signal, sys, time\n"
                  "import shell.distributed as d\n"
                  "from shell.cli import install_signal_handlers\n"
                  "from shell.stop import StopRequest\n"
                  "d.end_with_launcher(os.getppid())\n"
                  "stop = StopRequest()\n"
                  "install_signal_handlers(stop)\n"
                  "print('ready', flush=True)\n"
                  "while not stop.requested:\n"
                  "    time.sleep(0.01)\n"
                  "d.settle_signal()  # as Runner._check_stop does before the ranks agree to stop\n"
                  "print('stopped', flush=True)\n")

DYING_LAUNCHER = ("import os, signal, subprocess, sys, time\n"
                  "rank = subprocess.Popen([sys.executable, '-c', sys.argv[1]], stdout=subprocess.PIPE, text=True)\n"
                  "assert rank.stdout.readline() == 'ready\\n'\n"
                  "os.kill(rank.pid, signal.SIGTERM)\n"
                  "if sys.argv[2] == 'dies':\n"
                  "    time.sleep(0.5)  # the rank has its signal, and this process is still its parent\n"
                  "    os._exit(9)\n"
                  "print(rank.stdout.read(), end='', flush=True)\n"
                  "sys.exit(rank.wait())\n")


@pytest.mark.parametrize("launcher", ["dies", "lives"])
def test_a_signal_that_comes_while_the_launcher_is_still_the_parent_waits_to_see_it_end(tmp_path, launcher):
    """A rank's signal can come while its launcher, killed, is still its parent (the kernel has not finished
    tearing it down): the rank waits up to SETTLE seconds before it stops; a launcher that ends in that time ends
    the rank with the launcher's line and exit 129 (nothing saved), one that lives lets it stop as asked."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "RANK": "0", "WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "test"}
    with open(tmp_path / "stderr", "w") as stderr:  # the rank's stderr outlives a launcher that dies
        launcher_proc = subprocess.run([sys.executable, "-c", DYING_LAUNCHER, SIGNALLED_RANK, launcher],
                                       stdout=subprocess.PIPE, stderr=stderr, text=True, env=env, timeout=60)
    if launcher == "lives":
        assert launcher_proc.returncode == 0 and launcher_proc.stdout == "stopped\n", launcher_proc
        return
    assert launcher_proc.returncode == 9
    deadline = time.monotonic() + 30
    while "error: " not in (tmp_path / "stderr").read_text() and time.monotonic() < deadline:
        time.sleep(0.1)
    lines = (tmp_path / "stderr").read_text().strip().splitlines()
    assert lines and lines[-1].startswith("error: the torchrun launcher (pid "), lines
    assert "rank 0 of 2 stops here" in lines[-1]
