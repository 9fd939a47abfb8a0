"""The code blocks of docs/guides/tracking.md and curricula.md run as written, each on its own in a fresh
folder (W&B offline, MLflow without telemetry), unless the line before the fence says
``<!-- not-run: REASON -->``."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import ROOT
from .trackers import TRACKER_ENV

PAGES = ("tracking.md", "curricula.md")
FENCE = re.compile(r"^```(\w+)\n(.*?)^```\n", re.S | re.M)
NOT_RUN = re.compile(r"<!-- not-run: \S.* -->")


def blocks(page: str) -> list[tuple[str, str, str | None]]:
    """``(language, code, not-run reason line or None)`` of every fenced block of a page."""
    text = (ROOT / "docs" / "guides" / page).read_text()
    out = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").splitlines()
        marker = before[-1] if before and NOT_RUN.fullmatch(before[-1].strip()) else None
        out.append((match.group(1), match.group(2), marker))
    return out


CASES = [(page, i) for page in PAGES for i, (_, _, marker) in enumerate(blocks(page)) if marker is None]


def test_every_block_runs_or_says_why_not():
    for page in PAGES:
        found = blocks(page)
        assert found, page
        for language, _, marker in found:
            assert marker is not None or language in ("python", "bash"), (page, language)


@pytest.mark.parametrize("page, index", CASES)
def test_block_runs(page, index, tmp_path):
    language, code, _ = blocks(page)[index]
    env = {**os.environ, **TRACKER_ENV, "PYTHONPATH": str(ROOT),
           "PATH": os.pathsep.join((str(Path(sys.executable).parent), os.environ.get("PATH", "")))}
    env.pop("MLFLOW_TRACKING_URI", None)
    command = [sys.executable, "-c", code] if language == "python" else ["bash", "-euo", "pipefail", "-c", code]
    proc = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
