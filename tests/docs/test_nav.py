"""mkdocs.yml's nav lists every page, every guide under the name the README gives it, the home page's How-to
card links every guide, and the pages for contributors sit apart from the users' Reference."""

import re

from .blocks import ROOT

GUIDES = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs" / "guides").glob("*.md"))


def nav() -> dict[str, dict[str, str]]:
    """``{section: {path: title}}`` from mkdocs.yml's nav (top-level pages under the section ""), read as text so
    that the test needs no YAML parser."""
    text = (ROOT / "mkdocs.yml").read_text()
    found: dict[str, dict[str, str]] = {"": {}}
    section = ""
    for line in text[text.index("\nnav:\n"):].splitlines()[2:]:
        if not line.startswith(" "):
            break
        page = re.match(r"^(?P<indent> *)- (?P<title>[^:]+): (?P<path>\S+\.md)$", line)
        head = re.match(r"^  - (?P<title>[^:]+):$", line)
        if head:
            section = head.group("title")
            found[section] = {}
        elif page:
            found["" if len(page.group("indent")) == 2 else section][page.group("path")] = page.group("title")
    return found


def readme_guides() -> dict[str, str]:
    """``{guides/NAME.md: link text}`` of the README's Features table."""
    text = (ROOT / "README.md").read_text()
    return {m.group(2): m.group(1) for m in re.finditer(r"\[([^\]]+)\]\(docs/(guides/[\w-]+\.md)\)", text)}


def test_every_guide_is_in_the_nav_under_the_readmes_name():
    listed = nav()["How-to guides"]
    assert sorted(listed) == GUIDES, "list every guide in mkdocs.yml's nav, How-to guides"
    named = readme_guides()
    assert sorted(named) == GUIDES, "every guide needs a row in the README's Features table"
    assert {p: listed[p] for p in GUIDES} == {p: named[p] for p in GUIDES}, "nav titles differ from the README's"


def test_every_page_is_in_the_nav():
    pages = {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md")
             if "hooks" not in p.parts}
    listed = {path for section in nav().values() for path in section}
    assert sorted(pages - listed) == []


def test_the_docs_conventions_are_for_contributors_not_in_the_reference():
    sections = nav()
    assert "contributors/docs-conventions.md" in sections["Contributors"]
    assert not any("docs-conventions" in p for p in sections["Reference"])


def test_the_home_page_links_every_guide():
    text = (ROOT / "docs" / "index.md").read_text()
    card = text[text.index("**[How-to guides]"):text.index("**[Concepts]")]
    assert sorted(set(re.findall(r"\]\((guides/[\w-]+\.md)\)", card))) == GUIDES


def test_the_readme_is_short_and_links_the_config_reference():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 150
    assert "(docs/reference/config.md)" in text and "](shell/config/schema.py)" not in text
