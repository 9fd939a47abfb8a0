"""Worker processes that end with their parent: one small pool, and the guard every worker installs.

:class:`WorkerPool` starts N processes (forked where the platform allows, so that what they run need not
pickle; spawned elsewhere). Worker ``i`` calls ``serve(*args[i])`` once, which builds the object it serves
(a share of env copies, a game), and then answers requests over its own pipe: ``send(i, "step", x)`` runs
``obj.step(x)`` there, and ``receive(i, ...)`` returns the answer or raises the caller's error class with
one line. The first answer is the worker's report that ``serve`` returned. A worker whose call raises
reports it and ends.

A worker ends when its parent ends, however the parent ends (a ``kill -9`` too). Closing the pipe
alone would not do it: a forked worker inherits the parent's end of its own pipe and of every pipe
opened before it, and a pipe reads end-of-file only once every copy of the writing end is closed. So
each worker (:func:`become_worker`) closes the inherited ends it knows of, asks the kernel to kill it
when its parent dies (Linux ``prctl(PR_SET_PDEATHSIG, SIGKILL)``), and where that is not available
watches its parent's pid from a thread. Workers ignore SIGINT and SIGTERM: a terminal's Ctrl-C
signals the whole process group, and the parent alone answers it (it then closes its workers).
"""

from __future__ import annotations

import atexit
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from typing import Any

# The parent ends of every open pool's pipes in this process: a forked worker closes its copies of them.
_PARENT_ENDS: weakref.WeakSet[Any] = weakref.WeakSet()
_POOLS: weakref.WeakSet[WorkerPool] = weakref.WeakSet()  # closed at exit (multiprocessing would wait on them)

WATCH_PERIOD = 0.5  # seconds between a watching thread's looks at its parent's pid


def start_method() -> str:
    """``"fork"`` where the platform has it (what a worker runs need not pickle), else ``"spawn"``."""
    return "fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn"


def _kill_with_parent() -> bool:
    """Ask Linux to SIGKILL this process when the thread that started it ends; whether that took."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        pr_set_pdeathsig = 1
        return libc.prctl(pr_set_pdeathsig, ctypes.c_ulong(signal.SIGKILL), ctypes.c_ulong(0), ctypes.c_ulong(0),
                          ctypes.c_ulong(0)) == 0
    except (OSError, AttributeError):
        return False


def _watch(parent_pid: int) -> None:
    while True:
        time.sleep(WATCH_PERIOD)
        if os.getppid() != parent_pid:
            os._exit(1)


def become_worker(parent_pid: int, death_signal: bool = True) -> None:
    """Make this process a worker of ``parent_pid`` that ends when that process ends, ``kill -9`` included.

    Ignores SIGINT and SIGTERM, closes this process's inherited copies of the parent ends of every
    :class:`WorkerPool` pipe, and installs the parent-death guard: the kernel's death signal on Linux
    (``death_signal``, which should be False where the worker was started from a thread other than its
    parent's main thread, since Linux sends it when the starting *thread* ends), otherwise a thread that
    checks the parent's pid every :data:`WATCH_PERIOD` seconds. Exits at once if the parent is already gone.
    Called first thing in a new worker process (a :class:`WorkerPool`'s, or gymnasium's async workers').

    Args:
        parent_pid: the pid of the process that started this one (``os.getpid()`` there, before the start).
        death_signal: whether to use Linux's ``PR_SET_PDEATHSIG`` (where available).
    """
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for end in list(_PARENT_ENDS):
        try:
            end.close()
        except OSError:
            pass
    _PARENT_ENDS.clear()
    _POOLS.clear()  # the parent's, not this process's to close
    if not (death_signal and _kill_with_parent()):
        threading.Thread(target=_watch, args=(parent_pid,), name="ppo-core-parent-watch", daemon=True).start()
    if os.getppid() != parent_pid:  # the parent died before the guard was in place
        os._exit(1)


def _one_line(exc: BaseException) -> str:
    """``"Type: first line of the message"`` (shell.errors.first_line sits in this layer: no import between them)."""
    text = str(exc)
    return f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__


def _main(serve: Callable[..., Any], pipe: Any, args: tuple, parent_pid: int, death_signal: bool) -> None:
    """A worker process: :func:`become_worker`, then ``obj = serve(*args)`` and its requests until told to close."""
    become_worker(parent_pid, death_signal)
    obj = None
    try:
        try:
            obj = serve(*args)
            answer: tuple[bool, Any] = (True, None)
        except Exception as exc:
            answer = (False, _one_line(exc))
        while True:
            try:
                pipe.send(answer)
            except (OSError, EOFError):  # the parent is gone
                break
            except Exception as exc:  # an answer that does not pickle
                answer = (False, _one_line(exc))
                continue
            if not answer[0]:
                break
            try:
                request = pipe.recv()
            except (OSError, EOFError):
                break
            if request is None:  # close
                break
            method, call_args = request
            try:
                answer = (True, getattr(obj, method)(*call_args))
            except Exception as exc:
                answer = (False, _one_line(exc))
    finally:
        close = getattr(obj, "close", None)
        if callable(close):
            try:
                close()
            except Exception:
                pass
        pipe.close()


def usable_cpus() -> int:
    """How many CPUs this process may run on: its affinity where the platform reports one, else the machine's
    count (at least 1)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def split(count: int, parts: int) -> list[range]:
    """``count`` items in ``parts`` contiguous ranges whose sizes differ by at most one, the larger first
    (``split(7, 3)``: ``[range(0, 3), range(3, 5), range(5, 7)]``); ``parts`` is clipped to ``[1, count]``."""
    parts = max(1, min(count, parts))
    sizes = [count // parts + (w < count % parts) for w in range(parts)]
    starts = [sum(sizes[:w]) for w in range(parts)]
    return [range(start, start + size) for start, size in zip(starts, sizes, strict=True)]


def how_it_ended(processes: Sequence[Any], wait: float = 1.0) -> str:
    """How the first ended process of ``processes`` ended, as `` (killed by SIGKILL)`` or `` (exit code 1)``;
    ``""`` when none has ended within ``wait`` seconds or the cause is unknown.

    Args:
        processes: ``multiprocessing.Process`` objects (anything with ``is_alive()`` and ``exitcode``).
        wait: seconds to wait, in all, for an ended process to be reaped.
    """
    deadline = time.monotonic() + wait
    while True:
        for process in processes:
            if not process.is_alive():
                code = process.exitcode
                if code is not None and code < 0:
                    try:
                        return f" (killed by {signal.Signals(-code).name})"
                    except ValueError:
                        pass
                return "" if code is None else f" (exit code {code})"
        if time.monotonic() >= deadline:
            return ""
        time.sleep(0.02)


class WorkerPool:
    """``len(args)`` worker processes; worker ``i`` serves the object ``serve(*args[i])`` over its own pipe.

    Requests to one worker are answered in order, one answer per request; the workers work at the same
    time. The first answer of each worker (read it with :meth:`receive`) says whether ``serve`` returned.
    Workers end on :meth:`close`, after a call that raised, and when this process ends (:func:`become_worker`).

    Args:
        serve: runs in each worker and returns the object whose methods the requests call (its ``close()``,
            if any, is called when the worker ends). Under ``spawn`` it and ``args`` must pickle.
        args: one tuple of arguments to ``serve`` per worker.
        name: names the processes (``ps``, tracebacks).

    Raises:
        OSError: a process could not be started (the ones started are closed); under ``spawn`` also a pickling
            error for ``serve`` or ``args``.
    """

    def __init__(self, serve: Callable[..., Any], args: Sequence[tuple], name: str = "worker"):
        context = multiprocessing.get_context(start_method())
        death_signal = threading.current_thread() is threading.main_thread()
        self._pipes: list[Any] = []
        self.processes: list[Any] = []
        _POOLS.add(self)
        try:
            for i, worker_args in enumerate(args):
                parent_end, child_end = context.Pipe()
                _PARENT_ENDS.add(parent_end)
                self._pipes.append(parent_end)
                process = context.Process(target=_main, name=f"{name}-{i}", daemon=True,
                                          args=(serve, child_end, tuple(worker_args), os.getpid(), death_signal))
                try:
                    process.start()
                finally:
                    child_end.close()
                self.processes.append(process)
        except BaseException:
            self.close()
            raise

    def __len__(self) -> int:
        return len(self.processes)

    def send(self, index: int, method: str, *args: Any) -> None:
        """Ask worker ``index`` to run ``obj.method(*args)``; returns at once. A worker that has ended is
        reported by the :meth:`receive` that would have read the answer."""
        try:
            self._pipes[index].send((method, args))
        except (OSError, EOFError):
            pass

    def receive(self, index: int, error: type[Exception], what: str) -> Any:
        """Worker ``index``'s next answer (waits for it).

        Raises:
            error: ``"{what}: {ExceptionType}: {first line}"`` for a call that raised in the worker, or
                ``"{what}: a worker process ended"`` (with its exit code or signal when known) when the pipe broke.
        """
        try:
            ok, value = self._pipes[index].recv()
        except (OSError, EOFError):
            raise error(f"{what}: a worker process ended{how_it_ended(self.processes[index:index + 1])}") from None
        if not ok:
            raise error(f"{what}: {value}")
        return value

    def close(self, timeout: float = 5.0) -> None:
        """Ask every worker to close, wait up to ``timeout`` seconds in all, then kill the ones left (they ignore
        SIGTERM). Never raises; closing twice is harmless."""
        for pipe in self._pipes:
            try:
                pipe.send(None)
            except Exception:
                pass
            try:
                pipe.close()
            except Exception:
                pass
            _PARENT_ENDS.discard(pipe)
        deadline = time.monotonic() + timeout
        for process in self.processes:
            process.join(timeout=max(0.0, deadline - time.monotonic()))
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(timeout=1.0)
        _POOLS.discard(self)


@atexit.register
def _close_all() -> None:
    """Close the pools left open at exit. Registered after multiprocessing's own exit hook, so it runs first:
    that hook sends daemonic workers SIGTERM, which they ignore, and would then wait for them."""
    for pool in list(_POOLS):
        pool.close(timeout=1.0)
