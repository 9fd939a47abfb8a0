"""The lists written from the code into the committed pages (docs/hooks/generate.py) are current and say what
the code does: the extras, the shipped configs, the JSON fields of the summary and of ``eval``, and what each
backend refuses. Rewrite stale pages with ``python docs/hooks/generate.py --write``."""

import importlib.util
import re

import pytest
import tomllib

from shell.config import EnvConfig, config_extra, shipped_configs
from shell.errors import ConfigError

from .blocks import ROOT

spec = importlib.util.spec_from_file_location("docs_generate", ROOT / "docs" / "hooks" / "generate.py")
generate = importlib.util.module_from_spec(spec)
spec.loader.exec_module(generate)

PAGES = generate.committed_pages()


@pytest.mark.parametrize("path", sorted(PAGES), ids=[p.relative_to(ROOT).as_posix() for p in sorted(PAGES)])
def test_the_committed_page_is_what_the_code_writes(path):
    assert path.exists(), f"{path.relative_to(ROOT)} is missing: run python docs/hooks/generate.py --write"
    assert path.read_text(encoding="utf-8") == PAGES[path], (
        f"{path.relative_to(ROOT)} is stale: run python docs/hooks/generate.py --write")


def test_each_list_is_on_its_page():
    where = {"extras": "docs/getting-started.md", "configs": "docs/reference/cli.md",
             "summary-fields": "docs/reference/run-dir.md", "eval-fields": "docs/reference/cli.md",
             "refused": "docs/guides/backends.md", "refused:pettingzoo": "docs/guides/multi-agent.md"}
    for name, page in where.items():
        assert f"<!-- generated:{name} -->" in (ROOT / page).read_text(), f"{page} lost its {name} list"
    assert set(generate.GENERATORS) <= set(where)


def rows(table: str) -> list[list[str]]:
    return [[c.strip() for c in line.strip("|").split(" | ")] for line in table.splitlines()[2:]]


def test_the_extras_table_names_every_extra_and_what_it_installs():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    table = rows(generate.extras_table())
    assert sorted(r[0] for r in table) == sorted(f"`{e}`" for e in extras)
    assert [r[0] for r in table][-3:] == ["`dev`", "`bench`", "`docs`"]  # the project's own last
    for name_cell, use, installs in table:
        extra = name_cell.strip("`")
        specs = extras[extra]
        for spec_ in specs:
            name = re.match(r"[A-Za-z0-9_.-]+", spec_).group(0)
            assert (f"`{name}" in installs) if name != "ppo-core" else "and the extras" in installs, (extra, spec_)
        for config in shipped_configs():
            assert (f"`{config}`" in use) == (config_extra(config) == extra), (extra, config)
    for name in ("multiagent", "wandb", "mlflow", "games"):
        assert name in extras


def test_every_shipped_config_names_an_extra_that_exists():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    for config in shipped_configs():
        assert config_extra(config) in (None, *extras), config


def test_the_configs_table_is_what_ppo_core_configs_lists():
    table = rows(generate.configs_table())
    assert [r[0] for r in table] == [f"`{c}`" for c in shipped_configs()]
    for config, env, backend, extra in table:
        text = tomllib.loads((ROOT / "configs" / f"{config.strip('`')}.toml").read_text())["env"]
        assert env == generate.breakable_code(text["id"]) and backend == text.get("backend", "gymnasium")
        assert re.sub(r"<[^>]+>", "", env) == text["id"]
        assert extra == (f"`{config_extra(config.strip('`'))}`" if config_extra(config.strip("`")) else "")
    for name in ("taxi", "invalid-action", "simple-spread", "simple-tag", "tictactoe", "connect-four"):
        assert f"| `{name}` |" in generate.configs_table()


def test_the_json_fields_are_those_the_code_writes(tmp_path):
    """A real run and a real eval write no field that the pages leave out (the optional ones, for multi-agent
    runs, games, signals and videos, are read from the code that adds them)."""
    import torch

    import shell
    from shell.evaluation import eval_checkpoint

    design = ["env_id", "seed", "env_steps", "train_seconds", "sps", "eval_return_mean", "eval_return_std",
              "eval_episodes", "run_dir", "world_size"]
    assert set(design) <= set(generate.summary_keys())
    assert {"signal", "exit_code", "eval_vs", "eval_return_per_group"} <= set(generate.summary_keys())
    assert {"videos", "video_episodes", "videos_logged_to", "checkpoint"} <= set(generate.eval_keys())
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        result = shell.train("cartpole", run_dir=tmp_path / "run", total_timesteps=64, progress=False,
                             overrides={"env.num_envs": 2, "ppo.num_steps": 32, "ppo.num_minibatches": 1,
                                        "ppo.update_epochs": 1, "run.eval_episodes": 1})
        evaluated = eval_checkpoint(result.run_dir, episodes=1)
    finally:
        torch.set_num_threads(threads)
    assert set(result.summary) <= set(generate.summary_keys())
    assert set(evaluated) <= set(generate.eval_keys())
    assert [k for k in generate.summary_keys() if k in result.summary] == list(result.summary)  # same order


CASES = [
    ("pettingzoo", {"wrappers": [{"class": "gymnasium.wrappers:ClipReward"}]}),
    ("pettingzoo", {"atari": True}),
    ("pettingzoo", {"obs_keys": ["x"]}),
    ("envpool", {"wrappers": [{"class": "gymnasium.wrappers:ClipReward"}]}),
    ("envpool", {"atari": True}),
    ("ale", {"atari": False}),
    ("ale", {"atari": True, "max_episode_steps": 10}),
    ("torch", {"id": "Pendulum-v1", "action_mask": "info"}),
    ("torch", {"id": "NoSuchEnv-v0"}),
]


@pytest.mark.parametrize(("backend", "keys"), CASES, ids=[f"{b}-{'-'.join(k)}" for b, k in CASES])
def test_each_refusal_listed_is_the_line_the_backend_gives(backend, keys):
    from shell.envs.registry import check_config

    if backend in ("envpool", "ale", "pettingzoo"):
        pytest.importorskip({"envpool": "gymnasium", "ale": "ale_py", "pettingzoo": "pettingzoo"}[backend])
    with pytest.raises(ConfigError) as caught:
        check_config(EnvConfig(**{"id": "CartPole-v1", **keys, "backend": backend}))
    listed = generate.refusals(backend)
    patterns = [re.escape(m).replace(re.escape("..."), ".*") for m in listed]
    patterns = [re.sub(r"<env\\\.\w+>", ".*", p) for p in patterns]
    assert any(re.fullmatch(p, str(caught.value)) for p in patterns), (str(caught.value), listed)


def test_the_multi_agent_page_no_longer_refuses_async():
    text = (ROOT / "docs" / "guides" / "multi-agent.md").read_text()
    refused = text[text.index("## What is refused"):]
    assert "async vectorisation" not in refused
    assert not any("'async'" in line for line in generate.refusals("pettingzoo"))  # 'threads' is refused


def test_the_python_api_page_names_every_name_of_import_shell():
    import shell

    text = (ROOT / "docs" / "reference" / "python-api.md").read_text()
    intro = text[:text.index("\n## ")]
    for name in shell.__all__:
        assert f"`shell.{name}`" in intro, name
        module = shell._API[name]
        assert f"::: {module}.{name}" in text, name
