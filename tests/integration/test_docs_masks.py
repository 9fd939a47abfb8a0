"""docs/guides/action-masks.md: every code block runs standalone, or is marked ``<!-- not-run: REASON -->``."""

import re
import subprocess
import sys

import pytest

from .conftest import ROOT

PAGE = ROOT / "docs" / "guides" / "action-masks.md"
BLOCK = re.compile(r"(<!-- not-run: [^>]+ -->\n)?```(\w+)\n(.*?)```", re.S)


def blocks() -> list[tuple[bool, str, str]]:
    return [(bool(m.group(1)), m.group(2), m.group(3)) for m in BLOCK.finditer(PAGE.read_text())]


def test_every_block_is_python_or_marked_not_run():
    found = blocks()
    assert sum(1 for skip, _, _ in found if not skip) >= 3
    assert all(lang == "python" for skip, lang, _ in found if not skip)


@pytest.mark.parametrize("index", [i for i, (skip, _, _) in enumerate(blocks()) if not skip])
def test_the_page_s_python_block_runs_standalone(tmp_path, index):
    code = blocks()[index][2]
    proc = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
