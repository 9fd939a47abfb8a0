"""MkDocs hooks of the docs site (mkdocs.yml, ``hooks:``).

- reference/config.md and the lists between ``<!-- generated:NAME -->`` markers are generated from the code
  into the committed pages (``python docs/hooks/generate.py --write``; tests/docs/test_generated.py fails
  when one is stale), so the site shows them as the repository does;
- the benchmarks section is read where it is, in bench/ (not copied into docs/): bench/RESULTS.md, the
  results, as benchmarks/index.md; bench/BENCHMARKS.md, the dated log, as benchmarks/log.md; the charts
  and the raw files the results link (bench/results/**/*.png, *.json, *.jsonl) under benchmarks/results/;
- a page links a file where it is in the repository (a guide: ``../../bench/RESULTS.md``), so that the link
  works on disk and on GitHub (tests/docs/test_links.py); a link to a file the site shows elsewhere is rewritten
  to its place on the site (``../benchmarks/``), in the benchmarks pages too (``BENCHMARKS.md``: ``log.md``);
- ``<!-- cli-help: COMMAND -->`` becomes that command's ``--help`` text;
- ``<!-- not-run: REASON -->`` before a code block, a note for the people who write the pages, is left
  out of the site;
- formulas (``$...$``, ``$$...$$``, found by pymdownx.arithmatex) become MathML at build time, which
  browsers render themselves: no JavaScript, no CDN, works offline;
- every cell of a table gets its column's header as ``data-label``, which the narrow-screen layout
  (docs/stylesheets/extra.css) shows above the cell when a table's rows become cards;
- Sphinx roles left in docstrings (``:func:`train```) become links to the object where this page
  documents it, else plain code;
- every page under docs/guides/ that the nav does not list is added to "How-to guides", by title, so
  that a new guide is never unreachable (tests/docs/test_nav.py asks for a nav entry all the same).
"""

from __future__ import annotations

import html
import posixpath
import re
from pathlib import Path

from generate import render_cli_help, render_default_space, render_not_run
from latex2mathml.converter import convert as latex_to_mathml
from mkdocs.structure.files import File

ROOT = Path(__file__).resolve().parents[2]
BENCH = ROOT / "bench"
GUIDES_TITLE = "How-to guides"


def _listed(nav: list) -> set[str]:
    found: set[str] = set()
    for item in nav:
        values = item.values() if isinstance(item, dict) else [item]
        for value in values:
            if isinstance(value, list):
                found |= _listed(value)
            elif isinstance(value, str):
                found.add(value)
    return found


def _title(path: Path) -> str:
    heading = re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.M)
    return heading.group(1).strip() if heading else path.stem.replace("-", " ").capitalize()


def on_config(config, **_):
    """Add the guides the nav does not list to its "How-to guides" section, sorted by title."""
    nav = config.nav or []
    listed = _listed(nav)
    docs = Path(config.docs_dir)
    extra = sorted((p for p in (docs / "guides").glob("*.md") if p.relative_to(docs).as_posix() not in listed),
                   key=_title)
    for item in nav:
        if isinstance(item, dict) and GUIDES_TITLE in item:
            item[GUIDES_TITLE].extend({_title(p): p.relative_to(docs).as_posix()} for p in extra)
    return config


RESULT_FILES = ("*.png", "*.json", "*.jsonl")


def on_files(files, config, **_):
    """The generated config reference, and the benchmarks pages with their charts and raw files, as
    virtual files."""
    files.append(File.generated(config, "benchmarks/index.md", abs_src_path=str(BENCH / "RESULTS.md")))
    files.append(File.generated(config, "benchmarks/log.md", abs_src_path=str(BENCH / "BENCHMARKS.md")))
    results = BENCH / "results"
    for path in sorted(p for pattern in RESULT_FILES for p in results.rglob(pattern)):
        name = path.relative_to(results).as_posix()
        files.append(File.generated(config, f"benchmarks/results/{name}", abs_src_path=str(path)))
    return files


LINK_TARGET = re.compile(r"(?P<head>\]\(\s*<?)(?P<path>[^)\s>#]+)")
SCHEME = re.compile(r"^[a-zA-Z][a-zA-Z0-9+.-]*:")


def _site_links(markdown: str, page, files) -> str:
    """Links to a file where it is in the repository, as the page sits in the repository (a guide's
    ``../../bench/BENCHMARKS.md``, the results' ``BENCHMARKS.md``), rewritten to that file's place on the
    site (``../benchmarks/log.md``, ``log.md``): the source links work on disk and on GitHub
    (tests/docs/test_links.py), the site's links on the site."""
    on_site = {Path(f.abs_src_path).resolve(): f.src_uri for f in files if f.abs_src_path}
    here = Path(page.file.abs_src_path).parent
    folder = posixpath.dirname(page.file.src_uri)

    def link(match: re.Match) -> str:
        path = match.group("path")
        if SCHEME.match(path) or path.startswith("/"):
            return match.group(0)
        uri = on_site.get((here / path).resolve())
        if uri is None or posixpath.normpath(posixpath.join(folder, path)) == uri:
            return match.group(0)
        return match.group("head") + posixpath.relpath(uri, folder or ".")

    return LINK_TARGET.sub(link, markdown)


def on_page_markdown(markdown, page, files, **_):
    markdown = _site_links(markdown, page, files)
    return render_not_run(render_cli_help(render_default_space(markdown)))


MATH = re.compile(r'<(?P<tag>span|div) class="arithmatex">\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]</(?P=tag)>', re.S)


def _mathml(match: re.Match) -> str:
    block = match.group("open") == "["
    mathml = latex_to_mathml(html.unescape(match.group("tex")).strip(), display="block" if block else "inline")
    return f'<div class="math">{mathml}</div>' if block else mathml


ROLE = re.compile(r":(?:func|meth|class|data|attr|mod|exc|obj):<code>~?(?P<name>[\w.]+)</code>")
ANCHOR = re.compile(r'id="(?P<id>[\w.]+)"')


def _roles(content: str) -> str:
    ids = set(ANCHOR.findall(content))

    def link(match: re.Match) -> str:
        name = match.group("name")
        found = [i for i in ids if i == name or i.endswith("." + name)]
        code = f"<code>{name}</code>"
        return f'<a href="#{found[0]}">{code}</a>' if len(found) == 1 else code

    return ROLE.sub(link, content)


TABLE = re.compile(r"<table>.*?</table>", re.S)
HEADER_CELL = re.compile(r"<th(?:\s[^>]*)?>(?P<text>.*?)</th>", re.S)
ROW = re.compile(r"<tr(?:\s[^>]*)?>.*?</tr>", re.S)
DATA_CELL = re.compile(r"<td(?=[\s>])")
TAG = re.compile(r"<[^>]+>")


def _labelled(match: re.Match) -> str:
    """A table whose every data cell carries its column's header text as ``data-label``."""
    table = match.group(0)
    head, sep, body = table.partition("</thead>")
    labels = [" ".join(html.unescape(TAG.sub("", cell)).split()) for cell in HEADER_CELL.findall(head)]
    if not sep or not labels:
        return table

    def row(found: re.Match) -> str:
        names = iter(labels)
        return DATA_CELL.sub(lambda _: f'<td data-label="{html.escape(next(names, ""), quote=True)}"', found.group(0))

    return head + sep + ROW.sub(row, body)


def on_page_content(content, page, **_):
    """The formulas as MathML (pymdownx.arithmatex, generic mode, marks them); docstrings' Sphinx roles
    as links or code; tables' cells labelled with their column's header."""
    return TABLE.sub(_labelled, _roles(MATH.sub(_mathml, content)))


def on_serve(server, **_):
    """``mkdocs serve`` rebuilds when the benchmarks change."""
    server.watch(str(BENCH / "BENCHMARKS.md"))
    server.watch(str(BENCH / "RESULTS.md"))
    return server
