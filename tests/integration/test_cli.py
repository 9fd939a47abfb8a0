"""End to end through the real CLI: artifacts, the summary contract, exit codes."""

import csv
import json
import shlex

import pytest
import torch

from shell.config import CONFIG_DIR, load_config
from shell.errors import ConfigError, front_end


def test_short_pendulum_run_writes_every_artifact(main, tmp_path):
    run_dir = tmp_path / "run"
    proc = main("--config", "pendulum.toml", "--total-timesteps", "4000", "--run-dir", str(run_dir),
                "--set", "run.eval_episodes=3", "--seed", "3")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    for key in ("env_id", "seed", "env_steps", "train_seconds", "sps", "eval_return_mean", "eval_return_std",
                "eval_episodes", "run_dir", "world_size"):
        assert key in summary, key
    # 4,000 rounds up to whole rollouts of 16 x 200 = 3,200 transitions
    assert summary["env_steps"] == 6400
    assert summary["env_id"] == "Pendulum-v1" and summary["seed"] == 3 and summary["world_size"] == 1
    assert summary["eval_episodes"] == 3
    assert -2000 < summary["eval_return_mean"] <= 0
    assert json.loads((run_dir / "summary.json").read_text()) == summary
    assert "seed = 3" in (run_dir / "config.toml").read_text()
    rows = list(csv.DictReader(open(run_dir / "metrics.csv")))
    assert [int(r["env_steps"]) for r in rows] == [3200, 6400]
    for key in ("policy_loss", "value_loss", "approx_kl", "clipfrac", "explained_variance", "entropy", "sps",
                "episodic_return", "episodic_length"):
        assert rows[-1][key] != "", key
    assert float(rows[-1]["episodic_length"]) == 200
    assert list((run_dir / "tensorboard").glob("events.out.tfevents.*"))
    ckpts = list((run_dir / "checkpoints").glob("*.pt"))
    assert len(ckpts) == 1
    state = torch.load(ckpts[0], weights_only=True)
    assert state["env_steps"] == 6400 and "model" in state and "optimizer" in state
    assert "Pendulum-v1" in proc.stderr  # tqdm progress on stderr


def test_set_and_explicit_flags_precedence(main, tmp_path):
    proc = main("--config", "pendulum", "--set", "run.seed=5", "--seed", "7", "--total-timesteps", "100",
                "--set", "ppo.num_steps=10", "--set", "env.num_envs=2", "--set", "ppo.num_minibatches=2",
                "--set", "run.eval_episodes=1", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["seed"] == 7
    assert summary["env_steps"] == 100


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["--config", "nope.toml"], "not found"),
        (["--config", "pendulum", "--set", "ppo.gama=0.9"], "did you mean 'gamma'"),
        (["--config", "pendulum", "--set", "ppo.gamma=1.5"], "ppo.gamma = 1.5"),
        (["--config", "pendulum", "--set", "ppo.gamma=fast"],
         "--set 'ppo.gamma=fast': ppo.gamma = 'fast' has the wrong type"),
        (["--config", "pendulum", "--set", "gamma=0.9"], "section.key=value"),
        (["--config", "cartpole", "--set", "policy.hidden_sizes=64,64"],
         "expected a list of int; write it as TOML: --set 'policy.hidden_sizes=[64, 64]'"),
        (["--config", "cartpole", "--set", "env.normalize_obs=True"],
         "expected bool; write it as TOML: --set env.normalize_obs=true"),
        (["--config", "pendulum", "--total-timesteps", "0"], "--total-timesteps: must be an integer >= 1"),
        (["--config", "pendulum", "--set", "env.id=NoSuchEnv-v0"], "NoSuchEnv-v0"),
        (["--config", "pendulum", "--set", "env.id=no_such_module:Env-v0"],
         "module 'no_such_module' cannot be imported; put the folder that holds it on PYTHONPATH"),
        (["--config", "pendulum", "--set", "ppo.num_minibatches=7"], "not divisible"),
        (["--config", "pendulum", "--set", "env.id='mpe2.simple_spread_v3'"],
         "env 'mpe2.simple_spread_v3' names a PettingZoo module, not a gymnasium id; set env.backend = 'pettingzoo'"),
        (["--config", "simple-spread", "--set", "env.id='mpe2.simple_spread_v3:no_such_maker'"],
         "module 'mpe2.simple_spread_v3' has no 'no_such_maker'"),
    ],
)
def test_bad_input_exits_2_with_one_line(main, tmp_path, args, needle):
    proc = main(*args, "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2
    last = proc.stderr.strip().splitlines()[-1]
    assert needle in last
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "r").exists()  # nothing left behind, not even an empty run dir


@pytest.mark.parametrize(
    ("override", "hint"),
    [
        ("policy.hidden_sizes=64,64", "write it as TOML: --set 'policy.hidden_sizes=[64, 64]'"),
        ("policy.hidden_sizes=(32 32)", "write it as TOML: --set 'policy.hidden_sizes=[32, 32]'"),
        ("policy.hidden_sizes=64", "write it as TOML: --set 'policy.hidden_sizes=[64]'"),
        ("policy.hidden_sizes=[a]", "write it as TOML, e.g. --set 'policy.hidden_sizes=[64, 64]'"),
        ("policy.hidden_sizes=64,-1", "write it as TOML, e.g. --set 'policy.hidden_sizes=[64, 64]'"),  # not valid
        ("env.normalize_obs=True", "write it as TOML: --set env.normalize_obs=true"),
        ("env.normalize_obs=no", "write it as TOML: --set env.normalize_obs=false"),
        ("env.normalize_obs=maybe", "write it as TOML: --set env.normalize_obs=true (or false)"),
        ("policy.share_encoder=1", "write it as TOML: --set policy.share_encoder=true"),  # bool | None
        ("env.id=1", "write it as TOML: --set 'env.id=\"1\"'"),  # a string that TOML reads as a number
        ("env.obs_keys=image,direction", "write it as TOML: --set 'env.obs_keys=[\"image\", \"direction\"]'"),
        ("ppo.gamma=.99", "write it as TOML: --set ppo.gamma=0.99"),
        ("ppo.gamma=fast", "write it as TOML, e.g. --set ppo.gamma=0.99"),  # the key's default
        ("ppo.target_kl=high", "write it as TOML, e.g. --set ppo.target_kl=0.01"),  # no default: an example
        ("env.kwargs=5", "write it as TOML, e.g. --set 'env.kwargs={ name = 1 }'"),
        # the value quoted twice with its spelling passed 193 characters: the spelling is kept, the repeat goes
        ("run.eval_opponents=my_bots:centre_first,random",
         "write it as TOML: --set 'run.eval_opponents=[\"my_bots:centre_first\", \"random\"]'"),
    ],
)
def test_a_wrong_type_in_set_is_answered_with_its_toml_spelling(override, hint):
    """In the CLI's words (the CLI runs in ``front_end("cli")``); from Python the same hint is the entry to pass,
    ``'policy.hidden_sizes=[64, 64]'`` (tests/integration/test_api.py)."""
    with pytest.raises(ConfigError) as info, front_end("cli"):
        load_config("cartpole", [override])
    message = str(info.value)
    assert "\n" not in message and message.startswith(f"--set {override!r}: ") and message.endswith(f"; {hint}")
    fixed = shlex.split(hint.split("--set ", 1)[1].split(" (or")[0])[0]
    load_config("cartpole", [fixed])  # what the hint says to write is accepted


def test_non_empty_run_dir_is_refused(main, tmp_path):
    (tmp_path / "keep.txt").write_text("precious")
    proc = main("--config", "pendulum", "--run-dir", str(tmp_path))
    assert proc.returncode == 2
    assert "not empty" in proc.stderr.strip().splitlines()[-1]
    assert (tmp_path / "keep.txt").read_text() == "precious"


def test_the_cli_names_its_flags_where_the_python_api_names_its_arguments(main, tmp_path):
    """The messages that shell.train and shell.resume give in Python's words (run_dir=..., shell.resume(...),
    overrides entry ...: tests/integration/test_api.py) say the flags on the command line (issue 64)."""
    (tmp_path / "keep.txt").write_text("precious")
    missing = tmp_path / "none"
    for args, line in [
        (["--config", "cartpole", "--run-dir", str(tmp_path)],
         f"--run-dir {tmp_path} exists and is not empty; continue it with --resume {tmp_path}, or pick a new folder"),
        (["--resume", str(missing)], f"--resume {missing}: no such run dir"),
        (["--config", "cartpole", "--set", "ppo.gamma"],
         "--set 'ppo.gamma': expected section.key=value, e.g. --set ppo.gamma=0.99"),
    ]:
        proc = main(*args)
        assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1] == f"error: {line}", proc.stderr


def test_every_word_of_a_message_has_a_python_and_a_cli_form():
    """``shell.errors.WORDS``: the Python form names no flag, the CLI form names its flag (or command)."""
    from shell.errors import WORDS, said

    for name in WORDS:
        python = said(name, "x"), said(name)
        assert not any("--" in text for text in python), (name, python)
        with front_end("cli"):
            cli = said(name, "x"), said(name)
        assert all(text.startswith("--") or "--" in text or text.startswith("ppo-core") for text in cli), (name, cli)
    with front_end("cli"):
        assert said("run_dir", "nim-run") == "--run-dir nim-run" and said("resume", "nim-run") == "--resume nim-run"
    assert said("run_dir", "nim-run") == "run_dir='nim-run'" and said("resume", "nim-run") == "shell.resume('nim-run')"


@pytest.mark.parametrize("name", sorted(p.stem for p in CONFIG_DIR.glob("*.toml")))
def test_every_shipped_config_loads(name):
    config = load_config(name)
    assert config.run.total_timesteps >= config.batch_size
    if name == "lunarlander-continuous":
        assert config.env.kwargs == {"continuous": True} and config.ppo.ent_coef == 0.01


def test_the_shipped_configs_are_the_repository_configs_and_listed(main):
    from shell.installation import CONFIG_DIR as PACKAGE_CONFIGS

    from .conftest import ROOT

    assert sorted(p.name for p in PACKAGE_CONFIGS.glob("*.toml")) == sorted(
        p.name for p in (ROOT / "configs").glob("*.toml"))
    proc = main("configs")
    assert proc.returncode == 0
    lines = [line for line in proc.stdout.splitlines() if not line.startswith("#")]
    assert [line.split()[0] for line in lines] == sorted(p.stem for p in (ROOT / "configs").glob("*.toml"))
    # each with the extra its header names
    assert "pong  [atari]" in lines and "doorkey  [minigrid]" in lines and "cartpole" in lines


def test_a_config_not_found_is_a_short_line_that_says_how_to_list_them(main, tmp_path):
    proc = main("--config", "cartpol", "--run-dir", str(tmp_path / "r"))
    last = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and len(last) <= 200, last
    assert "did you mean 'cartpole'" in last and last.endswith("list them with: ppo-core configs")


def test_a_path_given_wins_over_a_shipped_config(main, tmp_path):
    (tmp_path / "cartpole.toml").write_text('[env]\nid = "CartPole-v1"\nnum_envs = 2\n[ppo]\nnum_steps = 8\n'
                                            'num_minibatches = 1\nupdate_epochs = 1\n[run]\ntotal_timesteps = 16\n'
                                            'eval_episodes = 1\n')
    proc = main("--config", "cartpole", "--run-dir", str(tmp_path / "r"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1])["env_steps"] == 16


def test_versions_json_names_the_package_version_and_the_checkout_commit(main, tmp_path):
    from shell.installation import git_state, package_version

    proc = main("--config", "cartpole", "--total-timesteps", "64", "--set", "env.num_envs=2",
                "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=1", "--set", "run.eval_episodes=1",
                "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 0, proc.stderr
    versions = json.loads((tmp_path / "r" / "versions.json").read_text())
    assert versions["ppo_core"] == package_version()
    commit, dirty = git_state()
    assert versions["git_commit"] == commit and versions["git_dirty"] == dirty


def test_versions_json_lists_the_env_packages_the_run_imported_in_the_env_layers_order(monkeypatch):
    """The env layer names the backends' packages (shell.envs.registry.PACKAGES); the runner names none."""
    import sys
    import types

    from shell.envs import env_package_versions
    from shell.runner import library_versions

    packages = ["ale_py", "envpool", "minigrid", "pettingzoo", "mpe2", "vmas", "open_spiel"]  # versions.json's order
    for name in packages:
        monkeypatch.delitem(sys.modules, name, raising=False)
    assert env_package_versions() == {}
    for name in reversed(packages):
        monkeypatch.setitem(sys.modules, name, types.ModuleType(name))
    assert list(env_package_versions()) == packages
    assert list(library_versions()) == ["python", "torch", "gymnasium", "numpy", "ppo_core", *packages,
                                        "git_commit", "git_dirty"]


def test_configs_takes_no_flags_and_version_names_the_package(main):
    from shell.installation import package_version

    proc = main("configs", "--bogus")
    assert proc.returncode == 2 and proc.stderr.strip().splitlines()[-1].endswith("unrecognized arguments: --bogus")
    proc = main("--version")
    assert proc.returncode == 0 and proc.stdout.startswith(f"ppo-core {package_version() or 'not installed'}")


def test_a_closed_pipe_is_not_an_error(tmp_path):
    import subprocess
    import sys

    from .conftest import ROOT

    reader = subprocess.Popen([sys.executable, str(ROOT / "main.py"), "configs"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, cwd=tmp_path)
    reader.stdout.close()  # as `| head -0` would: nothing reads what it prints
    _, err = reader.communicate(timeout=120)
    assert reader.returncode == 0 and b"Traceback" not in err
