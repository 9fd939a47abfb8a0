"""Pages and snippets generated from the code, for the docs site (``hooks.py``) and its tests.

- :func:`config_reference`: reference/config.md, one table per config section of ``shell/config/schema.py``
  (its attrs classes: each key's type, default, allowed values and one-line help);
- :func:`cli_help`: the ``--help`` text of a subcommand, from the parsers of ``shell/cli.py``;
- :func:`render_not_run`: the ``<!-- not-run: REASON -->`` marker before a code block, a note for the people
  who write the pages, left out of the site;
- :data:`GENERATORS`: the lists written into the committed Markdown between ``<!-- generated:NAME -->`` and
  ``<!-- /generated -->`` (the extras, the shipped configs, the JSON fields of the summary and of ``eval``, each
  backend's start-up refusals), so that readers of the repository see what readers of the site see.

Regenerate the committed pages (reference/config.md and every generated list) after a change of the code they
come from, and check them (``--check`` exits 1 when one is stale; tests/docs/test_generated.py does the same)::

    python docs/hooks/generate.py --write
    python docs/hooks/generate.py --check

Nothing here imports mkdocs, so the tests can import it alone.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import html
import importlib
import inspect
import io
import os
import re
import sys
import textwrap
import typing
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import tomllib

NOT_RUN = re.compile(r"^(?P<indent>[ \t]*)<!--\s*not-run:\s*(?P<reason>.*?)\s*-->[ \t]*$", re.M)


# ----------------------------------------------------------------------------- config keys
def _annotation(cls: type, name: str) -> Any:
    return typing.get_type_hints(cls)[name]


def config_sections() -> Iterator[tuple[str, type]]:
    """``(section name, attrs class)`` of every config section, nested ones (an attrs class as a key's
    type, such as ``[run.wandb]``) after their parent, as ``[section.key]``."""
    from shell.config.schema import SECTIONS

    def walk(name: str, cls: type) -> Iterator[tuple[str, type]]:
        yield name, cls
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if isinstance(annotation, type) and attrs.has(annotation):
                yield from walk(f"{name}.{field.name}", annotation)

    for name, cls in SECTIONS.items():
        yield from walk(name, cls)


def config_keys() -> Iterator[tuple[str, attrs.Attribute, type]]:
    """``(section.key, attrs field, section class)`` of every leaf key (not the nested sections)."""
    for section, cls in config_sections():
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if not (isinstance(annotation, type) and attrs.has(annotation)):
                yield f"{section}.{field.name}", field, cls


def key_type(field: attrs.Attribute) -> str:
    """The key's type as written in the schema, without ``| None`` (None is an absent key)."""
    text = field.type if isinstance(field.type, str) else getattr(field.type, "__name__", str(field.type))
    parts = [p.strip() for p in re.split(r"\|(?![^\[]*\])", text)]
    return " | ".join(p for p in parts if p != "None")


def key_default(field: attrs.Attribute) -> str:
    """The default as TOML spells it; ``absent`` for None."""
    from shell.config.loading import toml_value

    default = field.default
    if isinstance(default, attrs.Factory):
        default = default.factory()
    if default is None:
        return "absent"
    if default == {}:
        return "{}"
    return toml_value(default)


def _validators(validator: Any) -> Iterator[Any]:
    if validator is None:
        return
    inner = getattr(validator, "_validators", None)  # attrs.validators.and_
    if inner is not None:
        for v in inner:
            yield from _validators(v)
    else:
        yield validator


def key_allowed(field: attrs.Attribute) -> str:
    """What the key's validators allow, as markdown (code spans); ``true, false`` for a bool; "" when
    nothing beyond the type is checked."""
    from shell.config.loading import toml_value

    parts = []
    for validator in _validators(field.validator):
        choices = getattr(validator, "choices", None) or getattr(validator, "options", None)
        if choices is not None:
            parts.append(", ".join(f"`{toml_value(c)}`" for c in choices))
        elif getattr(validator, "allowed", None):
            text = validator.allowed
            parts.append(f"`{text}`" if re.match(r"^[\[\(<>]", text) else text)
    if not parts and key_type(field) == "bool":
        parts.append("`true`, `false`")
    return "; ".join(parts)


def key_help(field: attrs.Attribute) -> str:
    return field.metadata.get("help", "")


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def config_reference() -> str:
    """reference/config.md (committed): every key of every section, generated from shell/config/schema.py."""
    lines = [
        "---",
        "hide:",
        "  - toc",
        "---",
        "",
        "# Config keys",
        "",
        "<!-- Generated from shell/config/schema.py by docs/hooks/generate.py: do not edit; after a change of the",
        "     config schema, run: python docs/hooks/generate.py --write -->",
        "",
        "Every key of a run's TOML config, generated from the attrs classes of `shell/config/schema.py`. "
        "A key left out of a file takes its default; *absent* means the key "
        "has no value unless one is given (what that means is in its description). Set a key in a file, "
        "with `--set section.key=value` on the command line (the value parsed as TOML, else taken as a "
        "string), or with `overrides={\"section.key\": value}` from Python. A bad value stops the run "
        "before anything starts, with one line naming the key, the value and what is allowed "
        "(exit code 2).",
        "",
        "```toml",
        "[env]",
        'id = "CartPole-v1"',
        "num_envs = 8",
        "",
        "[ppo]",
        "learning_rate = 1e-3",
        "```",
        "",
        "The `[tune]` and `[tune.space]` tables of `ppo-core tune` are described in "
        "[Tuning](../guides/tuning.md); training ignores them.",
        "",
    ]
    for section, cls in config_sections():
        lines += [f"## [{section}]", ""]
        doc = inspect.cleandoc(cls.__doc__ or "")
        if doc:
            lines += [doc, ""]
        lines += ["| Key | Type | Default | Allowed | Description |", "|---|---|---|---|---|"]
        for field in attrs.fields(cls):
            annotation = _annotation(cls, field.name)
            if isinstance(annotation, type) and attrs.has(annotation):
                lines.append(f'| <span id="{section}.{field.name}"></span>`{field.name}` | table | | | '
                             f"The [{section}.{field.name}] section below. |")
                continue
            row = [f'<span id="{section}.{field.name}"></span>`{field.name}`', f"`{_cell(key_type(field))}`",
                   f"`{_cell(key_default(field))}`", _cell(key_allowed(field)), _cell(key_help(field))]
            lines.append("| " + " | ".join(row) + " |")
        lines.append("")
    return "\n".join(lines)


# ----------------------------------------------------------------------------- CLI help
def cli_help(command: str) -> str:
    """The ``--help`` text of ``ppo-core`` (``command`` "train") or of a subcommand, 82 columns wide
    (what a code block of the site shows without scrolling)."""
    from shell import cli

    parsers = {"train": cli.train_parser, "configs": cli.configs_parser, "eval": cli.eval_parser,
               "play": cli.play_parser, "plot": cli.plot_parser, "export": cli.export_parser, "tune": cli.tune_parser}
    if command not in parsers:
        raise KeyError(f"no CLI command {command!r}; one of {sorted(parsers)}")
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "82"
    try:
        parser: argparse.ArgumentParser = parsers[command]()
        parser.prog = "ppo-core" if command == "train" else f"ppo-core {command}"
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            parser.print_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old
    return out.getvalue().rstrip()


CLI_HELP = re.compile(r"^<!--\s*cli-help:\s*(?P<command>[\w-]+)\s*-->[ \t]*$", re.M)


def render_cli_help(markdown: str) -> str:
    """Each ``<!-- cli-help: COMMAND -->`` line (outside code blocks) replaced by that command's
    ``--help`` as a text block."""
    return _outside_fences(markdown, lambda text: CLI_HELP.sub(
        lambda m: f"```text\n{cli_help(m.group('command'))}\n```", text))


# ----------------------------------------------------------------------------- tune's default space
DEFAULT_SPACE_MARK = re.compile(r"^(?P<indent>[ \t]*)<!--\s*tune-default-space\s*-->[ \t]*$", re.M)


def default_space_toml() -> str:
    """``shell.tune.space.DEFAULT_SPACE`` as the ``[tune.space]`` table a config would write."""
    from shell.config.loading import toml_value
    from shell.tune.space import DEFAULT_SPACE

    lines = ["[tune.space]"]
    for key, dist in DEFAULT_SPACE.items():
        lines.append(f"{key} = {{ " + ", ".join(f"{name} = {toml_value(v)}" for name, v in dist.items()) + " }")
    return "\n".join(lines)


def render_default_space(markdown: str) -> str:
    """Each ``<!-- tune-default-space -->`` line (outside code blocks) replaced by the default search
    space as a TOML block, at the marker's indentation."""
    def block(m: re.Match) -> str:
        indent = m.group("indent")
        body = "\n".join(indent + line for line in default_space_toml().splitlines())
        return f"{indent}```toml\n{body}\n{indent}```"
    return _outside_fences(markdown, lambda text: DEFAULT_SPACE_MARK.sub(block, text))


FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})")


def _outside_fences(markdown: str, change: Any) -> str:
    """``change`` applied to the text between fenced code blocks; the blocks stay as they are."""
    out, chunk, fence = [], [], None
    for line in markdown.splitlines(keepends=True):
        m = FENCE.match(line)
        if fence is None and m:
            out.append(change("".join(chunk)))
            chunk, fence = [line], m.group(1)
        elif fence is not None:
            chunk.append(line)
            if m and m.group(1)[0] == fence[0] and len(m.group(1)) >= len(fence) and not line.strip()[len(m.group(1)):]:
                out.append("".join(chunk))
                chunk, fence = [], None
        else:
            chunk.append(line)
    out.append("".join(chunk) if fence is not None else change("".join(chunk)))
    return "".join(out)


# ----------------------------------------------------------------------------- not-run markers
def render_not_run(markdown: str) -> str:
    """Each ``<!-- not-run: REASON -->`` line (the line before a code block the tests do not run) left out of the
    site: the reason is for the people who write and test the pages, and stays in the Markdown source."""
    return _outside_fences(markdown, lambda text: NOT_RUN.sub("", text))


# ----------------------------------------------------------------------------- lists in the committed pages
ROOT = Path(__file__).resolve().parents[2]
GENERATED = re.compile(r"^<!-- generated:(?P<name>[\w:-]+) -->\n(?P<body>.*?)^<!-- /generated -->$", re.M | re.S)

#: What each extra of pyproject.toml is for; a new extra needs a line here (the test of the extras table says so).
EXTRA_USES = {
    "box2d": "LunarLander",
    "mujoco": "HalfCheetah, Hopper, Walker2d, Ant, Humanoid",
    "atari": "[Pixels and Atari](guides/pixels-atari.md) (ale-py has the ROMs)",
    "minigrid": "[MiniGrid](guides/minigrid-dict.md)",
    "multiagent": "[Several agents](guides/multi-agent.md): PettingZoo's Parallel API and the MPE tasks",
    "games": "[Turn-based games](guides/turn-based.md): PettingZoo's classic games",
    "vmas": "[VMAS](guides/vmas.md): batched multi-agent worlds on the run's device",
    "openspiel": "[Turn-based games](guides/turn-based.md): OpenSpiel's two-player games (Kuhn and Leduc poker) and "
                 "their exact exploitability",
    "video": "`eval --video`",
    "export": "[ONNX export](guides/export.md)",
    "tune": "[Tuning](guides/tuning.md)",
    "wandb": "[Weights & Biases](guides/tracking.md) (`run.loggers`)",
    "mlflow": "[MLflow](guides/tracking.md) (`run.loggers`)",
    "envpool": "[the EnvPool backend](guides/backends.md#envpool) (about 750 MB with its assets)",
    "bench": "the scripts in `bench/`; sb3-contrib's masked example env",
    "docs": "building this site",
    "dev": "the test suite",
}


PROJECT_EXTRAS = ("dev", "bench", "docs")


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _requirement(spec: str) -> str:
    """A requirement as the table names it: the name with its extras and an exact pin, no ranges."""
    m = re.match(r"\s*(?P<name>[A-Za-z0-9_.-]+(?:\[[^\]]*\])?)\s*(?P<pin>==\s*[\w.]+)?", spec)
    return f"`{m.group('name')}{(m.group('pin') or '').replace(' ', '')}`"


def extras() -> dict[str, list[str]]:
    """pyproject.toml's extras with their requirements, in the file's order."""
    return dict(_pyproject()["project"]["optional-dependencies"])


def config_extras() -> dict[str, str | None]:
    """Each shipped config with the extra its header names (``ppo-core configs`` shows the same)."""
    from shell.config import config_extra, shipped_configs

    return {name: config_extra(name) for name in shipped_configs()}


def extras_table() -> str:
    """Getting started's table: every extra of pyproject.toml (those for the project's own work, ``dev``,
    ``bench`` and ``docs``, last), what it is for, the shipped configs that need it, and what it installs
    (another extra of ppo-core named as such)."""
    by_extra: dict[str, list[str]] = {}
    for name, extra in config_extras().items():
        if extra:
            by_extra.setdefault(extra, []).append(name)
    missing = [e for e in extras() if e not in EXTRA_USES]
    if missing:
        raise KeyError(f"extras {missing} of pyproject.toml have no line in EXTRA_USES (docs/hooks/generate.py)")
    lines = ["| extra | for | installs |", "|---|---|---|"]
    for extra, specs in sorted(extras().items(), key=lambda item: item[0] in PROJECT_EXTRAS):
        own = [s for s in specs if not s.startswith("ppo-core[")]
        installs = ", ".join(dict.fromkeys(_requirement(s) for s in own))
        nested = [e for s in specs if s.startswith("ppo-core[") for e in s[len("ppo-core["):-1].split(",")]
        if nested:
            installs += ", and the extras " + ", ".join(f"`{e}`" for e in nested)
        use = EXTRA_USES[extra]
        if by_extra.get(extra):
            use += "; configs " + ", ".join(f"`{c}`" for c in by_extra[extra])
        lines.append(f"| `{extra}` | {use} | {installs} |")
    return "\n".join(lines)


def breakable_code(text: str) -> str:
    """``text`` as inline code that a narrow column may break after each ``.`` and ``:`` (a module path
    such as ``pettingzoo.classic.connect_four_v3``), never inside a name."""
    parts = re.split(r"(?<=[.:])", text)
    return "<code>" + "<wbr>".join(html.escape(part) for part in parts) + "</code>"


def configs_table() -> str:
    """The CLI page's table of the shipped configs: env id, backend and the extra each needs."""
    from shell.config import CONFIG_DIR

    lines = ["| config | env | backend | extra |", "|---|---|---|---|"]
    for name, extra in config_extras().items():
        env = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text(encoding="utf-8")).get("env", {})
        lines.append(f"| `{name}` | {breakable_code(env.get('id', ''))} | {env.get('backend', 'gymnasium')} | "
                     f"{f'`{extra}`' if extra else ''} |")
    return "\n".join(lines)


# The JSON fields: their names are read from the code that builds the objects (shell/runner.py's
# Trainer._write_summary, shell/evaluation.py's eval_fields and eval_checkpoint); what each means is written here.
# A field in the code without a line here, or a line here for a field the code does not write, fails the build.
FIELD_MEANINGS = {
    "env_id": "the env's id",
    "seed": "`run.seed`",
    "env_steps": "env steps actually taken (a total rounds up to whole rollouts), over all envs and ranks",
    "updates": "updates actually taken",
    "train_seconds": "training time, without start-up and the evaluations",
    "sps": "env steps per second of training",
    "eval_return_mean": "the mean return of the deterministic policy (the Gaussian's mean, or the argmax) "
                        "over the evaluation episodes; `null` when none ran",
    "eval_return_std": "their standard deviation",
    "eval_episodes": "evaluation episodes run (`run.eval_episodes`)",
    "eval_truncated_episodes": "evaluation episodes cut by the step cap or the env's time limit",
    "eval_max_episode_steps": "the evaluation's step cap (`run.eval_max_episode_steps`, else the env's limit)",
    "eval_return_per_agent": "multi-agent runs: `eval_return_mean` (the sum over all agents) per agent that took "
                             "part ([Several agents](../guides/multi-agent.md#returns))",
    "eval_return_per_group": "multi-agent runs with several groups: each group's sum",
    "eval_vs": "turn-based games: for each evaluation opponent, by the seat the policy played, its `win`, "
               "`draw` and `loss` rates, its `games` and how many of them were `distinct` "
               "(`run.eval_opening_moves` makes games against a deterministic bot differ; "
               "[Turn-based games](../guides/turn-based.md#evaluation-opponents))",
    "elo": "turn-based games: the Elo rating of each rated player (`random` = 0, the bots, the pool's "
           "snapshots and `policy`) ([Turn-based games](../guides/turn-based.md))",
    "nash_conv": "OpenSpiel games: the policy's exact NashConv (`run.exploitability`; "
                 "[OpenSpiel games](../guides/turn-based.md#openspiel-games-and-exact-exploitability))",
    "exploitability": "OpenSpiel games: NashConv / 2 in a zero-sum game, what a best responder gains on average "
                      "over the seats (0 at a Nash equilibrium)",
    "run_dir": "the run's folder",
    "checkpoint": "the final checkpoint (`null` when none was written)",
    "world_size": "processes under torchrun (1 without)",
    "device": "the device trained on",
    "interrupted": "true after SIGINT/SIGTERM",
    "stopped_early": "true when a callback (such as `StopOnReward`) ended training",
    "signal": "after SIGINT/SIGTERM only: the signal's name",
    "exit_code": "after SIGINT/SIGTERM only: the exit code, 130 or 143",
}
#: Where ``eval`` means something else by a field than the summary does.
EVAL_MEANINGS = {
    "env_steps": "the env steps of the checkpoint evaluated",
    "checkpoint": "the checkpoint evaluated",
    "eval_episodes": "evaluation episodes run (`--episodes`)",
    "video_episodes": "with `--video`: the episodes recorded (`--video-episodes`, default 1)",
    "videos": "with `--video`: the mp4 files written, `videos/ckpt_<steps>-episode-<i>.mp4` beside the checkpoint",
    "videos_logged_to": "with `--video` on a run dir's checkpoint: the trackers of `run.loggers` (W&B, MLflow) "
                        "whose run received the videos, `[]` for a run without one "
                        "([Experiment tracking](../guides/tracking.md))",
}


def _function(module: str, qualname: str) -> ast.FunctionDef:
    obj: Any = importlib.import_module(module)
    for part in qualname.split("."):
        obj = getattr(obj, part)
    tree = ast.parse(textwrap.dedent(inspect.getsource(obj)))
    return tree.body[0]  # type: ignore[return-value]


def _dict_keys(node: ast.AST, spread: dict[str, list[str]]) -> list[str]:
    """The string keys of a dict literal, with those of ``**{...}``, ``**(a if c else {...})`` and of ``**f(...)``
    for a function ``f`` named in ``spread``."""
    keys: list[str] = []
    if isinstance(node, ast.IfExp):
        return _dict_keys(node.body, spread) + _dict_keys(node.orelse, spread)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in spread:
        return list(spread[node.func.id])
    if not isinstance(node, ast.Dict):
        return keys
    for key, value in zip(node.keys, node.values, strict=True):
        if key is None:
            keys += _dict_keys(value, spread)
        elif isinstance(key, ast.Constant) and isinstance(key.value, str):
            keys.append(key.value)
    return keys


def _built_keys(function: ast.FunctionDef, variable: str | None, spread: dict[str, list[str]]) -> list[str]:
    """The keys a function puts in the dict it builds: the returned literal (``variable`` None), or the literal
    assigned to ``variable`` with its ``variable["k"] = ...`` and ``variable.update(k=...)`` additions."""
    keys: list[str] = []
    for node in ast.walk(function):
        if variable is None and isinstance(node, ast.Return) and node.value is not None:
            keys += _dict_keys(node.value, spread)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if isinstance(target, ast.Name) and target.id == variable and node.value is not None:
                    keys += _dict_keys(node.value, spread)
                elif (isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name)
                      and target.value.id == variable and isinstance(target.slice, ast.Constant)):
                    keys.append(target.slice.value)
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "update"
              and isinstance(node.func.value, ast.Name) and node.func.value.id == variable):
            keys += [k.arg for k in node.keywords if k.arg]
    return list(dict.fromkeys(keys))


def summary_keys() -> list[str]:
    """The fields of summary.json (and of a training run's last stdout line), in the order they are written."""
    spread = {"eval_fields": _built_keys(_function("shell.evaluation", "eval_fields"), None, {})}
    return _built_keys(_function("shell.runner", "Trainer._write_summary"), "summary", spread)


def eval_keys() -> list[str]:
    """The fields of ``ppo-core eval``'s JSON line and eval.json."""
    spread = {"eval_fields": _built_keys(_function("shell.evaluation", "eval_fields"), None, {})}
    return _built_keys(_function("shell.evaluation", "eval_checkpoint"), "result", spread)


def _fields_table(keys: list[str], meanings: dict[str, str]) -> str:
    missing = [k for k in keys if k not in meanings]
    if missing:
        raise KeyError(f"JSON fields {missing} have no meaning in docs/hooks/generate.py (FIELD_MEANINGS)")
    return "\n".join(["| key | meaning |", "|---|---|", *(f"| `{k}` | {meanings[k]} |" for k in keys)])


def summary_table() -> str:
    return _fields_table(summary_keys(), FIELD_MEANINGS)


def eval_table() -> str:
    return _fields_table(eval_keys(), {**FIELD_MEANINGS, **EVAL_MEANINGS})


def _message(node: ast.AST, backend: str) -> str:
    """An error message as a user reads it: an f-string's ``{cfg.backend!r}`` as the backend's name, another
    ``{cfg.KEY}`` as ``<env.KEY>``, anything else as ``...``."""
    if isinstance(node, ast.Constant):
        return str(node.value)
    if isinstance(node, ast.JoinedStr):
        out = []
        for part in node.values:
            if isinstance(part, ast.Constant):
                out.append(str(part.value))
            elif (isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Attribute)
                  and isinstance(part.value.value, ast.Name) and part.value.value.id == "cfg"):
                out.append(repr(backend) if part.value.attr == "backend" else f"<env.{part.value.attr}>")
            else:
                out.append("...")
        return "".join(out)
    return "..."


def refusals(backend: str) -> list[str]:
    """The messages a backend's ``check_config`` can stop a run with before anything starts, in its order,
    with those of the helpers it calls (``refuse_wrappers``)."""
    from shell.envs.registry import BACKENDS

    module = importlib.import_module(BACKENDS[backend])

    def walk(function: Callable) -> list[str]:
        found: list[str] = []
        nodes = ast.walk(ast.parse(textwrap.dedent(inspect.getsource(function))))
        for node in sorted(nodes, key=lambda n: (getattr(n, "lineno", 0), getattr(n, "col_offset", 0))):
            if (isinstance(node, ast.Raise) and isinstance(node.exc, ast.Call)
                    and getattr(node.exc.func, "id", None) == "ConfigError" and node.exc.args):
                found.append(_message(node.exc.args[0], backend))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                helper = getattr(inspect.getmodule(function), node.func.id, None)
                if inspect.isfunction(helper) and helper.__module__.startswith("shell."):
                    found += walk(helper)
        return found

    return walk(module.check_config)


def refused_list(backend: str) -> str:
    found = refusals(backend)
    if not found:
        return "- nothing: what the env cannot take is refused when it is made"
    return "\n".join(f"- `{m}`" for m in found)


def refused_by_backend() -> str:
    """Backends and speed: each backend's start-up refusals."""
    from shell.envs.registry import BACKENDS

    lines = ["| backend | refused at start-up (exit code 2) |", "|---|---|"]
    for name in BACKENDS:
        found = refusals(name)
        lines.append(f"| `{name}` | " + ("<br>".join(f"`{_cell(m)}`" for m in found) or "nothing") + " |")
    return "\n".join(lines)


#: ``<!-- generated:NAME -->`` ... ``<!-- /generated -->`` in the committed pages, by NAME; ``refused:BACKEND``
#: takes the backend's name.
GENERATORS: dict[str, Callable[[], str]] = {
    "extras": extras_table,
    "configs": configs_table,
    "summary-fields": summary_table,
    "eval-fields": eval_table,
    "refused": refused_by_backend,
}


def generated(name: str) -> str:
    if name.startswith("refused:"):
        return refused_list(name.split(":", 1)[1])
    if name not in GENERATORS:
        raise KeyError(f"no generated list {name!r}; one of {sorted(GENERATORS)} or refused:BACKEND")
    return GENERATORS[name]()


def render_generated(markdown: str) -> str:
    """Every ``<!-- generated:NAME -->`` region of a page filled with what the code says now."""
    return GENERATED.sub(lambda m: f"<!-- generated:{m.group('name')} -->\n{generated(m.group('name'))}\n"
                                   "<!-- /generated -->", markdown)


def committed_pages() -> dict[Path, str]:
    """Every page written from the code: reference/config.md whole, and each page with generated regions, as
    they should be now."""
    pages = {ROOT / "docs" / "reference" / "config.md": config_reference() + "\n"}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text(encoding="utf-8")
        if path not in pages and GENERATED.search(text):
            pages[path] = render_generated(text)
    return pages


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python docs/hooks/generate.py",
                                     description="Write (or check) the pages and lists generated from the code.")
    parser.add_argument("--write", action="store_true", help="rewrite the stale ones")
    parser.add_argument("--check", action="store_true", help="exit 1 when one is stale")
    args = parser.parse_args(argv)
    stale = []
    for path, text in committed_pages().items():
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            stale.append(path.relative_to(ROOT).as_posix())
            if args.write:
                path.write_text(text, encoding="utf-8")
    print(("rewritten: " if args.write else "stale: ") + (", ".join(stale) or "none"))
    return 1 if stale and args.check else 0


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))  # the checkout's code, not an installed copy
    raise SystemExit(main())
