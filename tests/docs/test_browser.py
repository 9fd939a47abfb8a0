"""Every page of the built site in a headless Chromium, on a laptop's screen and on a phone's.

The site is built once (``mkdocs build`` into a temporary folder; ``PPO_CORE_SITE=DIR`` reuses a built
site), then one browser tab loads each page at 1280x900 and at 390x844 and runs the checks of
``layout_checks.js``:

- no table or heading wider than its column, no table header broken inside a word, no empty header,
  no cell whose text is cut;
- every formula drawn as maths, none left as TeX or shown as code;
- code blocks may scroll, but their comments are seen whole, and the copy button covers no text.

Chromium is the system's (Debian: ``apt-get install chromium``; ``CHROMIUM=PATH`` names another); the
test is skipped, saying why, when it is missing or the docs extra is not installed.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from .blocks import ROOT
from .browser import Browser, find_chromium

VIEWPORTS = [(1280, 900), (390, 844)]
CHECKS = (Path(__file__).parent / "layout_checks.js").read_text()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    if os.environ.get("PPO_CORE_SITE"):
        return Path(os.environ["PPO_CORE_SITE"])
    pytest.importorskip("mkdocs", reason="the docs extra builds the site: pip install -e '.[docs]'")
    out = tmp_path_factory.mktemp("site")
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    return out


@pytest.fixture(scope="module")
def browser():
    executable = find_chromium()
    if executable is None:
        pytest.skip("no Chromium found (Debian: apt-get install chromium; or set CHROMIUM=PATH): "
                    "the layout of the built pages is not checked")
    with Browser(executable) as b:
        yield b


def test_every_page_fits_at_1280_and_390_px(browser, site):  # no browser: skipped before the build
    pages = sorted(p for p in site.rglob("index.html"))
    assert len(pages) > 20, f"only {len(pages)} pages built in {site}"
    failures = []
    for width, height in VIEWPORTS:
        for page in pages:
            browser.open(page.as_uri(), width, height)
            for problem in browser.evaluate(CHECKS):
                where = page.parent.relative_to(site).as_posix() or "(home)"
                failures.append(f"{width}px {where}: {problem['check']}: {problem['what']}")
    assert not failures, f"{len(failures)} layout problems:\n" + "\n".join(failures)
