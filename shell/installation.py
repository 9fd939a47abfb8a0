"""Where this package runs from: its version, its shipped configs, its git checkout if any, and the
pip command that installs an extra here.

The same code runs from a git checkout (``pip install -e .``, or ``python main.py`` with the checkout
on ``sys.path``), from an installed wheel, and from an sdist. Nothing here assumes a checkout:
the configs are package data (``shell/configs``, a link to the repository's ``configs/`` folder that
the build copies into the wheel), and the git commit is read only where the package's parent folder
is the project's checkout.
"""

from __future__ import annotations

import functools
import subprocess
from importlib import metadata
from pathlib import Path

DISTRIBUTION = "ppo-core"
PACKAGE_DIR = Path(__file__).resolve().parent
CONFIG_DIR = PACKAGE_DIR / "configs"
"""The shipped configs (``pendulum.toml``, ...), found by name from any folder."""


@functools.cache
def source_checkout() -> Path | None:
    """The project's source folder when the package runs from one (its ``pyproject.toml`` names this
    distribution), else None (an installed wheel)."""
    root = PACKAGE_DIR.parent
    try:
        text = (root / "pyproject.toml").read_text()
    except OSError:
        return None
    return root if f'name = "{DISTRIBUTION}"' in text else None


def install_hint(extra: str) -> str:
    """The pip command that installs ``extra`` for this installation: ``pip install -e ".[extra]"``
    inside a checkout, ``pip install "ppo-core[extra]"`` for an installed package."""
    if source_checkout() is not None:
        return f'pip install -e ".[{extra}]"'
    return f'pip install "{DISTRIBUTION}[{extra}]"'


def package_version() -> str | None:
    """The installed distribution's version (``importlib.metadata``), or None when the code runs from a
    checkout that was never installed."""
    return distribution_version(DISTRIBUTION)


def distribution_version(name: str) -> str | None:
    """An installed distribution's version (``importlib.metadata``; ``ale_py`` finds ``ale-py``), or None."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def git_state() -> tuple[str | None, bool | None]:
    """``(commit, dirty)`` of the checkout the code runs from, or ``(None, None)`` outside one (an
    installed wheel, a checkout without git, or git missing). ``dirty`` ignores untracked files."""
    root = source_checkout()
    if root is None:
        return None, None
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True,
                                timeout=5).stdout.strip() or None
        if commit is None:
            return None, None
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                    capture_output=True, text=True, timeout=5).stdout.strip())
    except (OSError, subprocess.SubprocessError):
        return None, None
    return commit, dirty
