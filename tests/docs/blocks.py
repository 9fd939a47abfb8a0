"""Code blocks of the README and of every page under docs/, as the docs tests run them.

The rules (docs/contributors/docs-conventions.md says them for people writing pages):

- ``python`` blocks of a page run in order in one interpreter namespace, ``bash`` blocks with
  ``bash -e -o pipefail``, all in one fresh folder per page, top to bottom, so a later block may use
  what an earlier one made (a variable, a run dir, a file);
- a block with ``title="NAME"`` (shown above the block on the site) is written to the file NAME in
  that folder instead of being run; a ``toml`` block is parsed and checked as a config (and its
  ``[tune]`` table as a search space);
- a block whose line before is ``<!-- not-run: REASON -->`` is not run (the reason stays in the source);
- ``text`` blocks are output or diagrams, not code; any other language needs a not-run marker.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FENCE = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})(?P<info>[^`]*)$")
NOT_RUN = re.compile(r"^\s*<!--\s*not-run:\s*(?P<reason>.*?)\s*-->\s*$")
TITLE = re.compile(r'title="(?P<title>[^"]+)"')
RUN_LANGS = {"python": "python", "py": "python", "bash": "bash", "sh": "bash", "console": "bash", "toml": "toml"}
TEXT_LANGS = {"text", "output", "plain"}


@dataclass(frozen=True)
class Block:
    page: str          # path relative to the repository root
    line: int          # 1-based line of the opening fence
    lang: str          # "python", "bash", "toml", "text" or what the fence says
    code: str
    title: str | None  # title="..." of the fence: the file the block is written to
    not_run: str | None  # the reason of a <!-- not-run: ... --> marker

    @property
    def runs(self) -> bool:
        return self.not_run is None and self.lang in ("python", "bash", "toml")

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md and every .md under docs/ (found, not listed)."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def blocks(path: Path) -> list[Block]:
    lines = path.read_text(encoding="utf-8").splitlines()
    page = path.relative_to(ROOT).as_posix()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        indent, fence, info = m.group("indent"), m.group("fence"), m.group("info").strip()
        end = i + 1
        close = re.compile(rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}\s*$")
        while end < len(lines) and not close.match(lines[end]):
            end += 1
        if end == len(lines):
            raise ValueError(f"{page}:{i + 1}: code block never closed")
        body = [ln[len(indent):] if ln.startswith(indent) else ln.lstrip() for ln in lines[i + 1:end]]
        word = info.split()[0].lstrip(".{").lower() if info else ""
        lang = RUN_LANGS.get(word, "text" if word in TEXT_LANGS else word)
        title = TITLE.search(info)
        marker = NOT_RUN.match(lines[i - 1]) if i > 0 else None
        out.append(Block(page, i + 1, lang, "\n".join(body) + "\n", title.group("title") if title else None,
                         marker.group("reason") if marker else None))
        i = end + 1
    return out
