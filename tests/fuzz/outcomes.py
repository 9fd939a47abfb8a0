"""The fuzzer's allowed outcomes, checked for a case run in-process (``shell.train``) or as ``main.py``.

- exit 0 (no exception): finite metrics and summary, finite checkpoints, and a policy (``load_policy``) whose
  every action on the env's own observations is inside the action space and legal under the mask (the env
  raises :class:`tests.fuzz.fuzz_envs.FuzzIllegalAction` otherwise); an export, where asked, acts as the policy;
- exit 2 (:class:`shell.errors.ConfigError`): one line of at most :data:`MAX_LINE` characters (with the CLI's
  ``"error: "``);
- exit 1 (:class:`shell.errors.TrainingError`), for an env's own fault: one line that names the last good
  checkpoint (which exists and is finite) or says that none was written yet.

Anything else fails the case: another exception (a traceback from the CLI), a case past its time limit (a
hang), a NaN in a checkpoint, or an exit that the case does not allow (a silent fallback, a refusal of what the
docs support).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from shell.actions import action_row
from shell.checkpoint import load_checkpoint
from shell.config import toml_value
from shell.errors import ConfigError, TrainingError

ROOT = Path(__file__).resolve().parents[2]
FUZZ_ENV = "tests.fuzz.fuzz_envs:Fuzz-v0"
MAX_LINE = 200
PREFIX = "error: "  # the CLI's, before the message of a ConfigError or TrainingError
#: Outcomes seen, by test and exit code (reported at the end of the session, tests/fuzz/conftest.py).
TALLY: Counter[tuple[str, int]] = Counter()


class CaseHang(Exception):
    """A case ran past its time limit."""


class Outcome(NamedTuple):
    """What a case did: ``code`` 0, 1 or 2 as the CLI would exit; ``message`` the error line ("" for 0);
    ``result`` what ``shell.train`` returned (None unless 0)."""

    code: int
    message: str
    result: Any = None


@contextmanager
def time_limit(seconds: float, what: str) -> Iterator[None]:
    """Raise :class:`CaseHang` in the main thread after ``seconds``."""
    def expire(_signum: int, _frame: Any) -> None:
        raise CaseHang(f"{what} ran past its {seconds:g} s limit")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def classify(fn: Callable[[], Any], seconds: float, what: str) -> Outcome:
    """Run ``fn`` under a time limit: 0 with its result, 2 for a ConfigError, 1 for a TrainingError; anything
    else propagates (the case fails with its traceback)."""
    with time_limit(seconds, what):
        try:
            return Outcome(0, "", fn())
        except ConfigError as exc:
            return Outcome(2, str(exc))
        except TrainingError as exc:
            return Outcome(1, str(exc))


def check_line(outcome: Outcome) -> None:
    """An error is one line; a start-up refusal at most :data:`MAX_LINE` characters with the CLI's prefix."""
    line = PREFIX + outcome.message
    assert outcome.message and "\n" not in outcome.message, f"not one line: {outcome.message!r}"
    assert "Traceback" not in outcome.message, outcome.message
    if outcome.code == 2:
        assert len(line) <= MAX_LINE, f"{len(line)} characters: {line}"


def checkpoints(run_dir: Path) -> list[Path]:
    return sorted((Path(run_dir) / "checkpoints").glob("*.pt"))


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors(v)
    elif isinstance(value, list | tuple):
        for v in value:
            yield from _tensors(v)


def check_checkpoints_finite(run_dir: Path) -> None:
    """No NaN or inf in any float tensor of the weights and normalisers of any saved checkpoint."""
    for path in checkpoints(run_dir):
        state = load_checkpoint(path)
        for key, value in state.items():
            if key in ("optimizer", "generator") or key.startswith("rng"):
                continue
            for tensor in _tensors(value):
                if tensor.is_floating_point():
                    assert torch.isfinite(tensor).all(), f"non-finite {key} in {path}"


def check_failure(outcome: Outcome, run_dir: Path) -> None:
    """Exit 1: one line naming the last good checkpoint (kept, finite) or saying that none was written yet."""
    check_line(outcome)
    assert "FuzzIllegalAction" not in outcome.message, f"the library sent an illegal action: {outcome.message}"
    if "no checkpoint was written yet" in outcome.message:
        assert not list((Path(run_dir) / "checkpoints").glob("ckpt_*.pt")), outcome.message
        return
    found = re.search(r"the last good checkpoint is (\S+\.pt)", outcome.message)
    assert found, f"names no checkpoint: {outcome.message}"
    assert Path(found.group(1)).is_file(), outcome.message
    check_checkpoints_finite(run_dir)


def check_exit(outcome: Outcome, codes: set[int], run_dir: Path, refusal_leaves_nothing: bool = True) -> bool:
    """The documented exit contract: the code is one ``codes`` allows; exit 2 is one line (and, with
    ``refusal_leaves_nothing``, no file in ``run_dir``), exit 1 is :func:`check_failure`'s. True for exit 0: the run
    trained, and the caller checks what it wrote."""
    assert outcome.code in codes, f"exit {outcome.code} ({outcome.message!r}); allowed: {sorted(codes)}"
    if outcome.code == 2:
        check_line(outcome)
        if refusal_leaves_nothing:
            assert not run_dir.exists() or not any(run_dir.iterdir()), "a refused run left files behind"
    elif outcome.code == 1:
        check_failure(outcome, run_dir)
    return outcome.code == 0


LOSS_COLUMNS = ("policy_loss", "value_loss", "entropy", "approx_kl", "grad_norm")


def check_metrics_finite(run_dir: Path, summary: dict[str, Any]) -> None:
    with open(Path(run_dir) / "metrics.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows, "metrics.csv has no row"
    for row in rows:
        for key in LOSS_COLUMNS:
            if row.get(key, "") != "":
                assert math.isfinite(float(row[key])), f"metrics.csv {key} = {row[key]}"
    for key in ("eval_return_mean", "eval_return_std", "sps"):
        value = summary.get(key)
        if isinstance(value, float):
            assert math.isfinite(value), f"summary {key} = {value}"


def check_resume(run_dir: Path, run: dict[str, Any], codes: set[int], env: Callable[[], Any] | None) -> int:
    """``shell.resume`` of a run that trained, for one more rollout (``env``: the factory it trained on, as a factory's
    run needs): exit 0 with finite metrics and checkpoints and the new total of steps, or exit 1 where ``codes``
    allows it (the env's own fault: a resumed env starts afresh and may meet it again); its exit code."""
    from shell.api import resume

    total = run["run.total_timesteps"] + run["env.num_envs"] * run["ppo.num_steps"]
    outcome = classify(lambda: resume(run_dir, total, env=env, progress=False), 240.0, "the resume")
    assert outcome.code in {0} | (codes & {1}), f"resume: exit {outcome.code} ({outcome.message!r})"
    if outcome.code == 1:
        check_failure(outcome, run_dir)
    else:
        check_metrics_finite(run_dir, outcome.result.summary)
        check_checkpoints_finite(run_dir)
        assert outcome.result.summary["env_steps"] == total, (outcome.result.summary["env_steps"], total)
    return outcome.code


def act_in_env(policy: Any, make_env: Callable[[], gym.Env], steps: int = 12, seed: int = 0) -> None:
    """Step a fresh env with the policy's deterministic actions, one observation at a time and as a batch of
    one; the env refuses any action outside its space or against its mask."""
    env = make_env()
    try:
        obs, info = env.reset(seed=seed)
        policy.reset()
        for _ in range(steps):
            mask = _mask(env, obs, info)
            action = policy(obs, action_mask=mask)
            batch = policy(_batched(obs), action_mask=None if mask is None else np.asarray(mask)[None])
            assert env.action_space.contains(action), f"{action!r} outside {env.action_space}"
            assert same_action(action_row(batch, 0), action) or policy.recurrent, (batch, action)
            obs, _, terminated, truncated, info = env.step(action)
            if terminated or truncated:
                obs, info = env.reset()
                policy.reset()
    finally:
        env.close()


def same_action(a: Any, b: Any) -> bool:
    """Equal actions, a composite's (dicts and tuples of arrays) part by part."""
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and list(a) == list(b) and all(
            same_action(a[k], b[k]) for k in a)
    if isinstance(a, tuple) or isinstance(b, tuple):
        return isinstance(a, tuple) and isinstance(b, tuple) and len(a) == len(b) and all(
            same_action(x, y) for x, y in zip(a, b, strict=True))
    return np.array_equal(np.asarray(a), np.asarray(b))


def _batched(obs: Any) -> Any:
    if isinstance(obs, dict):
        return {k: np.asarray(v)[None] for k, v in obs.items()}
    return np.asarray(obs)[None]


def _mask(env: gym.Env, obs: Any, info: dict) -> Any:
    inner = env.unwrapped
    mode = getattr(inner, "mask_mode", None)
    if mode == "info":
        return info["action_mask"]
    if mode == "method":
        return inner.action_masks()
    return None  # "obs": the policy reads obs["action_mask"] itself


def check_export(run_dir: Path, format: str) -> None:
    """``export_policy`` writes a file that acts as the policy (it checks itself on sampled observations, masks
    included); exit 2 only for what the exporter documents as unsupported."""
    from shell.export import export_policy

    exported = export_policy(run_dir, format)
    assert exported.path.is_file() and math.isfinite(exported.max_abs_diff)


def fuzz_overrides(spec: dict[str, Any], run: dict[str, Any], mask_setting: str = "auto") -> dict[str, Any]:
    return {**run, "env.id": FUZZ_ENV, "env.kwargs": {"spec": json.dumps(spec)}, "env.action_mask": mask_setting}


def make_fuzz_env(spec: dict[str, Any]) -> Callable[[], gym.Env]:
    from tests.fuzz import fuzz_envs

    return lambda: fuzz_envs.make(spec)


# ----------------------------------------------------------------------------- the CLI
def as_set_strings(overrides: dict[str, Any]) -> list[str]:
    """``{"ppo.gamma": 0.9}`` as ``--set`` strings."""
    return [f"{key}={toml_value(value)}" for key, value in overrides.items()]


def as_toml(overrides: dict[str, Any]) -> str:
    """``{"ppo.gamma": 0.9}`` as a config file."""
    sections: dict[str, dict] = {}
    for key, value in overrides.items():
        section, name = key.split(".", 1)
        sections.setdefault(section, {})[name] = value
    return "\n".join(f"[{section}]\n" + "".join(f"{name} = {toml_value(value)}\n" for name, value in values.items())
                     for section, values in sections.items())


def run_cli(args: list[str], cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    """``python main.py ARGS`` as a user runs it; a hang fails the case."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    try:
        return subprocess.run([sys.executable, str(ROOT / "main.py"), *args], capture_output=True, text=True,
                              cwd=cwd, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise CaseHang(f"main.py {' '.join(args[:4])} ... ran past its {timeout:g} s limit") from None


def cli_outcome(proc: subprocess.CompletedProcess) -> Outcome:
    """The outcome of a CLI run: 0 with its summary (the last stdout line, JSON), else the last stderr line
    (without the prefix); no traceback on stderr, and an exit code among 0, 1 and 2."""
    assert "Traceback" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode in (0, 1, 2), (proc.returncode, proc.stderr[-3000:])
    if proc.returncode == 0:
        return Outcome(0, "", json.loads(proc.stdout.strip().splitlines()[-1]))
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith(PREFIX), last
    return Outcome(proc.returncode, last[len(PREFIX):])
