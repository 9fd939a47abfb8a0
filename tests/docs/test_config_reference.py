"""reference/config.md, generated from shell/config/schema.py and committed, names every key as the schema does."""

import importlib.util
import re
import typing

import attrs
import pytest

from shell.config.loading import toml_value
from shell.config.schema import SECTIONS

from .blocks import ROOT

spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)

ROW = re.compile(r'^\| <span id="(?P<key>[\w.]+)"></span>`(?P<name>\w+)` \| (?P<rest>.*) \|$')


def expected_keys() -> dict[str, attrs.Attribute]:
    """Every leaf key, walked here from SECTIONS on its own (a key whose type is an attrs class is a
    nested section, ``[run.wandb]``, whose keys are ``run.wandb.KEY``)."""
    keys = {}

    def walk(prefix: str, cls: type) -> None:
        hints = typing.get_type_hints(cls)
        for field in attrs.fields(cls):
            if isinstance(hints[field.name], type) and attrs.has(hints[field.name]):
                walk(f"{prefix}.{field.name}", hints[field.name])
            else:
                keys[f"{prefix}.{field.name}"] = field

    for name, cls in SECTIONS.items():
        walk(name, cls)
    return keys


def page_rows() -> dict[str, list[str]]:
    rows = {}
    for line in generate.config_reference().splitlines():
        m = ROW.match(line)
        if m:
            cells = [c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", m.group("rest"))]
            if cells[0] != "table":  # a nested section's own row; its keys have rows of their own
                rows[m.group("key")] = cells
    return rows


def unquote(cell: str) -> str:
    return cell[1:-1] if cell.startswith("`") and cell.endswith("`") else cell


def test_every_key_is_on_the_page_and_nothing_else():
    keys, rows = expected_keys(), page_rows()
    assert len(keys) > 50
    assert sorted(set(keys) - set(rows)) == [], "keys missing from reference/config.md"
    assert sorted(set(rows) - set(keys)) == [], "reference/config.md names keys the schema does not have"


@pytest.mark.parametrize("key", sorted(expected_keys()))
def test_each_row_says_what_the_schema_says(key):
    field = expected_keys()[key]
    type_cell, default_cell, allowed_cell, help_cell = page_rows()[key]
    assert help_cell == field.metadata["help"] and help_cell, f"{key}: help"
    default = field.default.factory() if isinstance(field.default, attrs.Factory) else field.default
    assert unquote(default_cell) == ("absent" if default is None else "{}" if default == {} else toml_value(default))
    declared = field.type if isinstance(field.type, str) else field.type.__name__
    assert unquote(type_cell) == declared.replace(" | None", "").replace("None | ", "")
    validator = field.validator
    if getattr(validator, "choices", None):
        assert allowed_cell == ", ".join(f"`{toml_value(c)}`" for c in validator.choices)
    elif getattr(validator, "allowed", None):
        assert validator.allowed in allowed_cell
    elif unquote(type_cell) == "bool":
        assert allowed_cell == "`true`, `false`"


def test_allowed_values_are_those_the_validators_enforce():
    rows = page_rows()
    assert rows["ppo.gamma"][2] == "`[0.0, 1.0]`"
    assert rows["env.num_envs"][2] == "`>= 1`"
    assert rows["ppo.learning_rate"][2] == "`> 0.0`"
    assert rows["policy.activation"][2] == '`"tanh"`, `"relu"`, `"elu"`, `"silu"`'
    # every key whose validator bounds or lists its values says so on the page
    for key, field in expected_keys().items():
        if field.validator is not None and (getattr(field.validator, "allowed", None)
                                            or getattr(field.validator, "choices", None)):
            assert rows[key][2], f"{key}: the page does not say what is allowed"


def test_the_page_is_in_the_nav_committed_and_current():
    """The repository's readers (the README links it) see the page the site shows; a stale copy fails here:
    rewrite it with python docs/hooks/generate.py --write."""
    assert "reference/config.md" in (ROOT / "mkdocs.yml").read_text()
    page = ROOT / "docs" / "reference" / "config.md"
    assert page.is_file() and page.read_text(encoding="utf-8") == generate.config_reference() + "\n"


def test_a_nested_section_is_documented_with_its_keys(monkeypatch):
    """A section inside a section (``[run.wandb]``) gets its own table of ``run.wandb.KEY`` rows."""

    @attrs.frozen(kw_only=True)
    class Tracker:
        """A tracker."""

        project: str = attrs.field(default="ppo", metadata={"help": "The project name."})

    @attrs.frozen(kw_only=True)
    class Run:
        """Run."""

        seed: int = attrs.field(default=0, metadata={"help": "Seed."})
        tracker: Tracker = attrs.field(factory=Tracker, metadata={"help": "The tracker."})

    monkeypatch.setattr("shell.config.schema.SECTIONS", {"run": Run})
    page = generate.config_reference()
    assert "## [run.tracker]" in page and '<span id="run.tracker.project"></span>`project`' in page
    assert "| `str` | `\"ppo\"` |" in page
