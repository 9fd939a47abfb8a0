"""Your own env setup in TOML: ``[[env.wrappers]]``, relative paths in ``[env.kwargs]``, and ``--video``
with a ``render_mode`` of the user's; each through main.py: train, eval, resume, errors."""

import json
import os

import pytest
import torch

from shell.checkpoint import latest_checkpoint, load_checkpoint
from shell.config import load_config, resolve_kwarg_paths
from shell.envs import make_env
from shell.errors import ConfigError
from shell.inference import load_policy
from shell.seeding import eval_seeds, per_copy, train_seeds

from .test_regressions import read_rows

CUSTOM = "tests.integration.custom_envs"
TINY = ["--set", "env.num_envs=2", "--set", "ppo.num_steps=16", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=1", "--set", "run.eval_episodes=2"]
# Innermost first: clip to [0, 4], then 2 r + 0.5 (the other order would give different sums),
# then the time as a third observation component.
WRAPPERS = f"""
[env]
id = "{CUSTOM}:Counting-v0"

[[env.wrappers]]
class = "gymnasium.wrappers:ClipReward"
kwargs = {{ min_reward = 0.0, max_reward = 4.0 }}

[[env.wrappers]]
class = "{CUSTOM}:ScaleReward"
kwargs = {{ factor = 2.0, offset = 0.5 }}

[[env.wrappers]]
class = "gymnasium.wrappers:TimeAwareObservation"
"""


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


def wrapped_return(length: int) -> float:
    """The return of a CountingEnv episode of ``length`` steps (rewards 1..length) through WRAPPERS."""
    return sum(2.0 * min(k, 4) + 0.5 for k in range(1, length + 1))


def wrapped_eval_mean(episodes: int) -> float:
    """The mean wrapped return of a seed-0 evaluation of ``episodes`` CountingEnv episodes (episode i in phase
    s_i % 3 of its seed, shell/seeding.py)."""
    return sum(wrapped_return((3, 5, 7)[s % 3]) for s in eval_seeds(0, "spawn", episodes)) / episodes


def wrapped_episode_means(num_envs: int, num_steps: int, updates: int) -> list[float]:
    """The mean wrapped return of the episodes that end in each update of a CountingEnv run (seed 0), by hand.

    Sub-env i starts at phase s_i % 3 (lengths 3, 5, 7 in turn; s_i its reset seed, shell/seeding.py) and runs
    on across rollouts.
    """
    phase, t_in_episode = [s % 3 for s in per_copy(train_seeds(0, "spawn", num_envs), num_envs)], [0] * num_envs
    ended: list[list[int]] = [[] for _ in range(updates)]
    for t in range(updates * num_steps):
        for i in range(num_envs):
            t_in_episode[i] += 1
            if t_in_episode[i] == (3, 5, 7)[phase[i]]:
                ended[t // num_steps].append(t_in_episode[i])
                t_in_episode[i], phase[i] = 0, (phase[i] + 1) % 3
    return [sum(map(wrapped_return, lengths)) / len(lengths) for lengths in ended]


def test_wrappers_train_evaluate_and_resume_through_main(main, tmp_path):
    config = tmp_path / "wrapped.toml"
    config.write_text(WRAPPERS)
    run = tmp_path / "run"
    num_envs, num_steps, updates = 3, 16, 3
    proc = main("--config", str(config), *TINY, "--set", f"env.num_envs={num_envs}",
                "--total-timesteps", str(updates * num_envs * num_steps), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    # episode statistics report the reward as the wrapped env returns it
    returns = [float(r["episodic_return"]) for r in read_rows(run)]
    assert returns == pytest.approx(wrapped_episode_means(num_envs, num_steps, updates), rel=1e-6)
    # the final evaluation: each episode of its seed's phase
    summary = last_json(proc.stdout)
    assert summary["eval_return_mean"] == pytest.approx(wrapped_eval_mean(2))
    saved = (run / "config.toml").read_text()
    assert 'class = "gymnasium.wrappers:ClipReward", kwargs = { min_reward = 0.0, max_reward = 4.0 }' in saved
    assert load_config(str(run / "config.toml")).env.wrappers == load_config(str(config)).env.wrappers
    assert load_checkpoint(latest_checkpoint(run / "checkpoints"))["config"]["env"]["wrappers"][1] == {
        "class": f"{CUSTOM}:ScaleReward", "kwargs": {"factor": 2.0, "offset": 0.5}}
    # eval and load_policy rebuild the wrapped env: returns and the observation space are the wrapped ones
    out = last_json(main("eval", str(run), "--episodes", "3").stdout)
    assert out["eval_return_mean"] == pytest.approx(wrapped_eval_mean(3))
    assert load_policy(run).observation_space.shape == (3,)
    # --resume rebuilds the wrapped env from the checkpoint's config
    proc = main("--resume", str(run), "--total-timesteps", str(2 * updates * num_envs * num_steps))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval_return_mean"] == pytest.approx(wrapped_eval_mean(2))
    rows = read_rows(run)
    assert len(rows) == 2 * updates
    possible = {wrapped_return(n) for n in (3, 5, 7)}
    assert all(min(possible) <= float(r["episodic_return"]) <= max(possible) for r in rows[updates:])


BAD_WRAPPERS = [  # (env.wrappers as TOML, what the one-line error says)
    ('[{class = "no_such_module:Wrap"}]', "env.wrappers[0] (no_such_module:Wrap): cannot import 'no_such_module'"),
    ('[{class = "gymnasium.wrappers:NoSuchWrapper"}]', "has no 'NoSuchWrapper'"),
    (f'[{{class = "gymnasium.wrappers:ClipReward", kwargs = {{max_reward = 1}}}}, {{class = "{CUSTOM}:ScaleReward"}}]',
     "env.wrappers[1] (tests.integration.custom_envs:ScaleReward) cannot wrap the env with kwargs = {}: TypeError"),
    ('[{class = "gymnasium.wrappers:ClipReward", kwargs = {min_reward = 0, bogus = 1}}]', "'bogus'"),
    (f'[{{class = "{CUSTOM}:not_an_env"}}]', "returned an object of type int, not a gymnasium.Env"),
    (f'[{{class = "{CUSTOM}:STUB_ATARI_SCORE"}}]', "is a float, not a wrapper class"),
    ('[{class = "ClipReward"}]', 'needs class = "module.path:ClassName"'),
    ('[{class = "gymnasium.wrappers:ClipReward", args = [1]}]', "unknown key 'args'"),
    ('[{class = "gymnasium.wrappers:ClipReward", kwargs = 3}]', "kwargs must be a table"),
    ('{class = "gymnasium.wrappers:ClipReward"}', "expected an array of tables"),
]


@pytest.mark.parametrize(("wrappers", "needle"), BAD_WRAPPERS)
def test_a_bad_wrapper_is_one_config_error_line(tmp_path, wrappers, needle):
    """At load (the entry's form) or when the env is made (import, construction, result)."""
    config = tmp_path / "bad.toml"
    config.write_text(f'[env]\nid = "CartPole-v1"\nwrappers = {wrappers}\n')
    with pytest.raises(ConfigError) as info:
        make_env(load_config(str(config)).env, torch.device("cpu"), num_envs=2).close()
    assert needle in str(info.value) and "\n" not in str(info.value)


@pytest.mark.parametrize("case", [0, 2, 4])  # an import, a construction, a result
def test_a_bad_wrapper_exits_2_through_main_and_leaves_no_run_dir(main, tmp_path, case):
    wrappers, needle = BAD_WRAPPERS[case]
    proc = main("--config", "cartpole", "--set", f"env.wrappers={wrappers}", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert line.startswith("error: ") and needle in line, line
    assert not (tmp_path / "r").exists()


def test_wrappers_need_the_gymnasium_backend(main, tmp_path):
    """The torch backend checks its own keys (shell/envs/torch_native.py), before a run dir exists."""
    from shell.envs import check_config

    config = load_config("cartpole-torch", ['env.wrappers=[{class = "gymnasium.wrappers:ClipReward"}]'])
    with pytest.raises(ConfigError, match=r"env\.wrappers need env\.backend = 'gymnasium'"):
        check_config(config.env)
    proc = main("--config", "cartpole-torch", "--set", 'env.wrappers=[{class = "gymnasium.wrappers:ClipReward"}]',
                "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "env.wrappers need env.backend = 'gymnasium'" in proc.stderr.splitlines()[-1]
    assert not (tmp_path / "r").exists()


def test_a_wrapper_that_raises_during_a_step_exits_1(main, tmp_path):
    proc = main("--config", "cartpole", *TINY, "--set", f'env.wrappers=[{{class = "{CUSTOM}:RaiseAfter", '
                "kwargs = { steps = 20 }}]", "--set", "run.checkpoint_every=1", "--total-timesteps", "256",
                "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "RuntimeError: wrapper blew up" in line and "the last good checkpoint is" in line
    assert line.endswith("ckpt_000000000032.pt")  # one update of 2 x 16 steps; the wrapper raised in the second


# ----------------------------------------------------------------------------- relative paths in env.kwargs
def test_relative_kwarg_paths_resolve_against_the_config_folder(main, tmp_path):
    folder = tmp_path / "project"
    (folder / "assets").mkdir(parents=True)
    (folder / "assets" / "model.xml").write_text("<mujoco/>")
    (folder / "my.toml").write_text(f'[env]\nid = "{CUSTOM}:DataFile-v0"\n'
                                    'kwargs = { data_file = "assets/model.xml", label = "assets" }\n')
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    run = tmp_path / "run"
    proc = main("--config", str(folder / "my.toml"), *TINY, "--total-timesteps", "32", "--run-dir", str(run),
                cwd=elsewhere)
    assert proc.returncode == 0, proc.stderr[-2000:]
    kwargs = load_config(str(run / "config.toml")).env.kwargs
    # "assets" names a folder beside the config: made absolute too (the rule is about what exists)
    assert kwargs == {"data_file": str(folder / "assets" / "model.xml"), "label": str(folder / "assets")}
    assert main("eval", str(run), "--episodes", "1", cwd=tmp_path).returncode == 0
    # --set paths are relative to the current folder
    proc = main("--config", str(folder / "my.toml"), "--set", "env.kwargs.data_file=model.xml", *TINY,
                "--total-timesteps", "32", "--run-dir", str(tmp_path / "run2"), cwd=folder / "assets")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert load_config(str(tmp_path / "run2" / "config.toml")).env.kwargs["data_file"] == \
        str(folder / "assets" / "model.xml")


def test_resolve_kwarg_paths_rule(tmp_path):
    (tmp_path / "a.xml").write_text("")
    kwargs = {"xml_file": "a.xml", "mode": "fast", "absolute": "/nowhere/b.xml", "n": 3, "empty": "",
              "nested": {"f": "a.xml"}, "dot": ".", "missing": "b.xml", "nul": "a\0b"}
    out = resolve_kwarg_paths(kwargs, tmp_path)
    assert out == {**kwargs, "xml_file": str(tmp_path / "a.xml"), "dot": str(tmp_path)}
    assert kwargs["xml_file"] == "a.xml"  # the input is not changed


# ----------------------------------------------------------------------------- --video and a user's render_mode
def test_video_overrides_a_render_mode_in_env_kwargs(main, tmp_path):
    """The run renders as text (env.kwargs.render_mode = "ansi"); RecordVideo needs rgb_array and gets it."""
    run = tmp_path / "run"
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:RenderModes-v0", "--set",
                'env.kwargs.render_mode="ansi"', *TINY, "--total-timesteps", "32", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    proc = main("eval", str(run), "--episodes", "1", "--video")
    assert proc.returncode == 0, proc.stderr[-2000:]
    (video,) = last_json(proc.stdout)["videos"]
    assert os.path.getsize(video) > 100 and open(video, "rb").read()[4:8] == b"ftyp"
