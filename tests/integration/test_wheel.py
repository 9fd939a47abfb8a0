"""The package as a user installs it: a wheel built from this checkout (through an sdist, as
``python -m build`` does), installed into a fresh virtual environment and used from a folder outside
the checkout, with nothing of the checkout on ``sys.path``.

The fresh environment reuses this environment's third-party packages through a ``.pth`` line (so
torch is not installed again); ppo-core itself comes only from the wheel, which the first test checks.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from .conftest import ROOT

VERSION = next(line.split('"')[1] for line in (ROOT / "pyproject.toml").read_text().splitlines()
               if line.startswith("version = "))


def _source_files() -> list[Path]:
    """The checkout's files that git tracks or would track (a clean clone's content, plus new files not yet
    committed), else every file but build outputs."""
    try:
        out = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                             capture_output=True, check=True).stdout
        return [Path(p) for p in out.decode().split("\0") if p]
    except (OSError, subprocess.CalledProcessError):
        skip = {".git", ".venv", ".ci-venv", "runs", "build", "dist", "__pycache__", ".pytest_cache"}
        return [p.relative_to(ROOT) for p in ROOT.rglob("*")
                if not p.is_dir() and not skip.intersection(p.relative_to(ROOT).parts)]


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> dict:
    """Build the sdist and wheel from a copy of the checkout, install the wheel into a new venv."""
    base = tmp_path_factory.mktemp("wheel")
    source = base / "source"
    for rel in _source_files():
        target = source / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if not (ROOT / rel).exists() and not (ROOT / rel).is_symlink():
            continue  # deleted in the working tree
        if (ROOT / rel).is_symlink():
            target.symlink_to(os.readlink(ROOT / rel))
        elif (ROOT / rel).is_file():
            shutil.copy2(ROOT / rel, target)
    dist = base / "dist"
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--wheel", "--no-isolation", "--outdir", str(dist),
                    str(source)], check=True, capture_output=True, timeout=600)
    (wheel,) = dist.glob("*.whl")
    venv = base / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    python = venv / "bin" / "python"
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", str(wheel)], check=True, capture_output=True, timeout=300)
    site = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          check=True, capture_output=True, text=True).stdout.strip()
    ours = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (Path(site) / "_reuse_test_env.pth").write_text("\n".join(ours) + "\n")
    work = base / "work"  # outside the checkout: nothing of it on sys.path
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    return {"wheel": wheel, "python": python, "bin": venv / "bin", "work": work, "env": env}


def _run(installed: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run(list(args), cwd=installed["work"], env=installed["env"], capture_output=True, text=True,
                          timeout=timeout)


def _summary(proc: subprocess.CompletedProcess) -> dict:
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_the_wheel_holds_every_subpackage_and_the_shipped_configs(installed):
    names = set(zipfile.ZipFile(installed["wheel"]).namelist())
    for init in [*(ROOT / "core").rglob("__init__.py"), *(ROOT / "shell").rglob("__init__.py")]:
        assert str(init.relative_to(ROOT)) in names, init
    for module in [*(ROOT / "shell").rglob("*.py"), *(ROOT / "core").rglob("*.py")]:
        assert str(module.relative_to(ROOT)) in names, module
    for config in (ROOT / "configs").glob("*.toml"):
        assert f"shell/configs/{config.name}" in names, config.name
    assert not any(n.startswith(("tests/", "bench/")) for n in names)
    code = "import shell, core; print(shell.__file__); print(core.__file__)"
    files = _run(installed, str(installed["python"]), "-c", code).stdout.split()
    assert all("site-packages" in f and str(ROOT) not in f for f in files), files


def test_ppo_core_trains_evaluates_exports_plots_and_resumes_from_another_folder(installed):
    ppo = str(installed["bin"] / "ppo-core")
    listed = _run(installed, ppo, "configs")
    assert listed.returncode == 0 and "cartpole" in listed.stdout.split() and "pendulum" in listed.stdout.split()

    summary = _summary(_run(installed, ppo, "--config", "cartpole", "--total-timesteps", "4096", "--run-dir", "run"))
    run = installed["work"] / "run"
    assert summary["env_steps"] == 4096 and (installed["work"] / summary["run_dir"]).resolve() == run.resolve()
    versions = json.loads((run / "versions.json").read_text())
    assert versions["ppo_core"] == VERSION and versions["git_commit"] is None and versions["git_dirty"] is None

    evaluated = _summary(_run(installed, ppo, "eval", "run", "--episodes", "3"))
    assert evaluated["eval_episodes"] == 3
    exported = _summary(_run(installed, ppo, "export", "run", "--format", "pt2"))
    assert (installed["work"] / exported["export"]).is_file() and exported["format"] == "pt2"
    plotted = _summary(_run(installed, ppo, "plot", "run"))
    assert (installed["work"] / plotted["plot"]).is_file()
    resumed = _summary(_run(installed, ppo, "--resume", "run", "--total-timesteps", "8192"))
    assert resumed["env_steps"] == 8192


def test_missing_extra_message_names_the_installed_package(installed):
    code = ("import sys; sys.modules['optuna'] = None; sys.argv = ['ppo-core', 'tune', '--config', 'acrobot', "
            "'--trials', '1']; from shell.cli import entry_point; entry_point()")
    proc = _run(installed, str(installed["python"]), "-c", code)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].endswith('run: pip install "ppo-core[tune]"'), proc.stderr


def test_tune_starts_its_workers_from_the_installed_package(installed):
    proc = _run(installed, str(installed["bin"] / "ppo-core"), "tune", "--config", "acrobot", "--trials", "2",
                "--jobs", "2", "--total-timesteps", "4096", "--seeds", "0", "--set", "run.eval_episodes=3",
                "--study-dir", "study", timeout=900)
    summary = _summary(proc)
    assert summary["complete"] == 2 and summary["failed"] == 0, summary
    assert (installed["work"] / "study" / "best.toml").is_file()


def test_python_m_shell_trains_pendulum(installed):
    summary = _summary(_run(installed, str(installed["python"]), "-m", "shell", "--config", "pendulum",
                            "--run-dir", "pendulum"))
    assert summary["env_id"] == "Pendulum-v1" and summary["env_steps"] == 102_400
    assert summary["eval_return_mean"] > -400
