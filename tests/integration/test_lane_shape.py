"""The shape of the lanes (DESIGN.md, "The fourth round"): whether a run has one group of agents or several is
asked only in the env layer (shell/envs/) and the lanes module (shell/lanes.py, with the layout of lane
policies in shell/policies/groups.py); above them nothing tests for a group class, reads a backend capability
flag, or reads an env's attributes for what its contract returns; and there is one evaluation loop."""

import ast
import re
from pathlib import Path

import pytest

SHELL = Path(__file__).resolve().parents[2] / "shell"
ALLOWED = ("envs/", "lanes.py", "policies/groups.py")

# what only the env layer and the lanes module may know
FORBIDDEN = {
    r"isinstance\([^)]*\b(AgentGroups|ActorCritic|ParallelVecEnv|GymVecEnv)\b": "a class test for groups of "
                                                                             "agents (ask policy.lanes())",
    r"\bMULTI_AGENT\b": "a backend capability flag (it stays in shell/envs/registry.py)",
    r"\bstep_groups\b|\bgroup_agents\b": "a multi-agent env's own method or attribute",
    # config.env.action_mask is the config's key, not the env's
    r"(?<!config\.)\benv\.(groups|valid|action_mask|mask_source|rows_per_env)\b":
        "an env attribute the contract returns as data",
    r"getattr\(\s*(self\.)?_?env\b": "an attribute read off an env",
    r"\bGroup(Storage|PPO|Collector)\b|_GroupOptimizers": "a per-group shim",
}


def _sources() -> list[Path]:
    return [p for p in SHELL.rglob("*.py") if not str(p.relative_to(SHELL)).startswith(ALLOWED)]


@pytest.mark.parametrize("pattern", list(FORBIDDEN))
def test_no_one_or_several_question_above_the_env_layer(pattern: str):
    hits = [f"{p.relative_to(SHELL)}:{i}: {line.strip()}" for p in _sources()
            for i, line in enumerate(p.read_text().splitlines(), 1) if re.search(pattern, line)]
    assert not hits, f"{FORBIDDEN[pattern]}:\n" + "\n".join(hits)


def test_the_check_itself_finds_what_it_forbids():
    """The patterns are not vacuous: each matches the kind of line it is meant to refuse."""
    samples = ["if isinstance(agent, AgentGroups):", 'getattr(module, "MULTI_AGENT", False)',
               "results = env.step_groups(actions)", "mask = env.action_mask", 'getattr(self.env, "groups", None)',
               "self.storage = GroupStorage(parts)"]
    for sample, pattern in zip(samples, FORBIDDEN, strict=True):
        assert re.search(pattern, sample), (pattern, sample)


def _env_step_calls(path: Path) -> int:
    tree = ast.parse(path.read_text())
    return sum(1 for node in ast.walk(tree) if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
               and node.func.attr == "step" and isinstance(node.func.value, ast.Name) and node.func.value.id == "env")


def test_one_evaluation_loop_and_one_collector_loop():
    """evaluation.py steps an env in one place (one loop for one lane or many, video included), and so does
    the rollout (one collector drives every lane)."""
    assert _env_step_calls(SHELL / "evaluation.py") == 1
    assert _env_step_calls(SHELL / "rollout.py") == 1


def test_the_rollout_knows_no_pool_and_no_module_outside_the_games_home_makes_an_opponents_moves():
    """Self-play's opponents act inside the env the learner is handed (shell.games.PoolEnv): the rollout and the
    lanes name no pool, and random moves (torch.multinomial) and sampled snapshot moves are made in shell/games only
    (the policies sample their own actions; the env layer's masks and bots aside)."""
    for name in ("rollout.py", "lanes.py"):
        code = "\n".join(line for line in (SHELL / name).read_text().splitlines() if not line.lstrip().startswith("#"))
        names = {n.id for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Name)}
        attrs_ = {n.attr for n in ast.walk(ast.parse(code)) if isinstance(n, ast.Attribute)}
        assert not {n for n in names | attrs_ if "pool" in n.lower()}, name
    for path in SHELL.rglob("*.py"):
        rel = path.relative_to(SHELL).as_posix()
        if rel.startswith(("games/", "policies/", "envs/")):
            continue
        tree = ast.parse(path.read_text())
        calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
        assert not [c for c in calls if c.func.attr == "multinomial"], rel
        assert not [c for c in calls if c.func.attr == "act" and any(
            k.arg == "deterministic" and isinstance(k.value, ast.Constant) and k.value.value is False
            for k in c.keywords)], rel
