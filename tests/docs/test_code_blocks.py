"""Every code block of the README and of the docs pages runs, or says why not (tests/docs/blocks.py)."""

import json
import os
import subprocess
import sys
from dataclasses import asdict
from pathlib import Path

import pytest

from .blocks import ROOT, blocks, pages

PAGES = [p for p in pages() if any(b.runs for b in blocks(p))]


def test_every_code_block_is_run_or_says_why_not():
    problems = []
    for page in pages():
        for block in blocks(page):
            if block.not_run is not None and not block.not_run:
                problems.append(f"{block.where()}: a not-run marker needs a reason")
            elif block.lang not in ("python", "bash", "toml", "text") and block.not_run is None:
                problems.append(f"{block.where()}: a {block.lang or 'plain'} block is neither run nor marked "
                                "<!-- not-run: REASON -->")
    assert not problems, "\n".join(problems)


def test_the_docs_have_code_that_runs():
    found = [b for p in pages() for b in blocks(p)]
    assert sum(b.runs for b in found) >= 30 and any(b.page.startswith("docs/guides/") and b.runs for b in found)


@pytest.mark.parametrize("page", PAGES, ids=[p.relative_to(ROOT).as_posix() for p in PAGES])
def test_page_code_blocks_run(page: Path, tmp_path: Path):
    to_run = [asdict(b) for b in blocks(page) if b.runs]
    (tmp_path / ".blocks.json").write_text(json.dumps(to_run))
    work = tmp_path / "work"
    work.mkdir()
    # the user's view: the installed package and its console script on PATH, the checkout not on sys.path
    bindir = str(Path(sys.executable).parent)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PATH=bindir + os.pathsep + env.get("PATH", ""), MPLBACKEND="Agg", NO_MKDOCS_2_WARNING="1")
    driver = Path(__file__).with_name("run_page.py")
    proc = subprocess.run([sys.executable, str(driver), str(tmp_path / ".blocks.json")], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-6000:]
