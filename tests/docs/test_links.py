"""Every relative link of the README and of the pages resolves on disk, from the page's own folder, so that it
works in a checkout and on GitHub as well as on the site.

A page links the file as it sits in the repository (the benchmarks as ``../../bench/RESULTS.md``, their charts
under ``../../bench/results/``); docs/hooks/hooks.py rewrites such a link to the file's place on the site.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from .blocks import FENCE, ROOT, pages

# [text](target "title") and ![alt](target); the text may hold one level of brackets
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?(?P<target>[^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")  # http:, https:, mailto:, ...
CODE_SPAN = re.compile(r"(`+).+?\1")
SITE_PAGES = [ROOT / "bench" / "RESULTS.md", ROOT / "bench" / "BENCHMARKS.md"]  # on the site as benchmarks/


def prose(text: str) -> str:
    """The text without its fenced code blocks and code spans (a link there is code, not a link)."""
    out, fence = [], None
    for line in text.splitlines():
        m = FENCE.match(line)
        if fence is None and m:
            fence = m.group("fence")
        elif fence is not None and m and m.group("fence").startswith(fence) and not m.group("info").strip():
            fence = None
        elif fence is None:
            out.append(CODE_SPAN.sub("", line))
    return "\n".join(out)


def relative_links(path: Path) -> list[str]:
    targets = (m.group("target") for m in LINK.finditer(prose(path.read_text(encoding="utf-8"))))
    return [t for t in targets if not SCHEME.match(t) and not t.startswith("#")]


def test_the_link_finder_sees_links_and_skips_code_urls_and_anchors(tmp_path):
    page = tmp_path / "page.md"
    page.write_text('See [a](a.md#x), ![c](img/c.png "C") and [b [1]](../b.md).\n[w](https://x.org) [t](#top)\n'
                    "[m](mailto:a@b.c) `[no](code.md)`\n\n```markdown\n[no](block.md)\n```\n")
    assert relative_links(page) == ["a.md#x", "img/c.png", "../b.md"]


def test_every_relative_link_resolves_on_disk():
    dead = [f"{page.relative_to(ROOT)}: {target}"
            for page in [*pages(), *SITE_PAGES] for target in relative_links(page)
            if not (page.parent / target.split("#", 1)[0]).exists()]
    assert not dead, "dead links (link the file where it is in the repository; docs/hooks/hooks.py maps it for " \
                     "the site):\n" + "\n".join(dead)


def test_the_site_build_rewrites_a_repository_link_to_the_files_place_on_the_site():
    pytest.importorskip("mkdocs", reason="the docs extra builds the site: pip install -e '.[docs]'")
    sys.path.insert(0, str(ROOT / "docs" / "hooks"))
    try:
        import hooks
    finally:
        sys.path.remove(str(ROOT / "docs" / "hooks"))
    bench, docs = ROOT / "bench", ROOT / "docs"
    files = [SimpleNamespace(abs_src_path=str(path), src_uri=uri) for path, uri in [
        (bench / "RESULTS.md", "benchmarks/index.md"), (bench / "BENCHMARKS.md", "benchmarks/log.md"),
        (bench / "results" / "speed_vs_sb3.png", "benchmarks/results/speed_vs_sb3.png"),
        (docs / "guides" / "tuning.md", "guides/tuning.md"), (docs / "index.md", "index.md")]]
    guide, home, log = (SimpleNamespace(file=f) for f in (files[3], files[4], files[1]))
    text = "[r](../../bench/RESULTS.md) [l](../../bench/BENCHMARKS.md#a-b) [t](tuning.md#x) [w](https://x.org/a.md)"
    assert hooks._site_links(text, guide, files) == \
        "[r](../benchmarks/index.md) [l](../benchmarks/log.md#a-b) [t](tuning.md#x) [w](https://x.org/a.md)"
    assert hooks._site_links("![c](../bench/results/speed_vs_sb3.png)", home, files) == \
        "![c](benchmarks/results/speed_vs_sb3.png)"
    assert hooks._site_links("[r](RESULTS.md#top) [c](results/speed_vs_sb3.png)", log, files) == \
        "[r](index.md#top) [c](results/speed_vs_sb3.png)"
