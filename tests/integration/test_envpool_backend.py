"""``env.backend = "envpool"``: built from the config, run through the one NEXT_STEP path.

EnvPool itself is too heavy for CI (about 750 MB); ``envpool_standin/envpool.py`` has the semantics
the backend relies on (NEXT_STEP autoreset, seeding, time limit, id list). Real runs: BENCHMARKS.md.
"""

import json
import os
import sys
from pathlib import Path

import pytest
import torch

import tests.integration.custom_envs  # noqa: F401 - registers Counting-v0
from shell.config import config_from_dict
from shell.errors import ConfigError
from shell.runner import Trainer

STANDIN = Path(__file__).resolve().parent / "envpool_standin"


@pytest.fixture
def standin(monkeypatch):
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.delitem(sys.modules, "envpool", raising=False)
    yield
    sys.modules.pop("envpool", None)


def counting_config(**env) -> dict:
    return config_from_dict({"env": {"id": "Counting-v0", "backend": "envpool", "num_envs": 3, **env},
                             "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 1},
                             "run": {"total_timesteps": 96, "eval_episodes": 0, "device": "cpu"}})


def test_the_config_path_keeps_dummy_steps_out_and_bootstraps_truncations(standin, tmp_path):
    """Counting-v0: the k-th step of an episode pays k; episodes of 3 and 5 steps end by termination,
    those of 7 by the time limit. Every step after an end is a dummy, flagged invalid; the episode
    statistics are whole episodes; a truncation's reward carries the bootstrap gamma * V(final_obs)."""
    trainer = Trainer(counting_config(), tmp_path)
    assert trainer.env.env.next_step
    obs = trainer.env.reset(seed=0)
    obs, episodes = trainer.collect(obs)
    episodes = episodes[None]
    st = trainer.lanes.only.storage
    valid, dones, rewards = st.valid, st.dones, st.rewards
    assert not valid.all()
    ended = dones[:-1] & valid[:-1]
    assert torch.equal(~valid[1:], ended)  # a dummy right after each end, and nowhere else
    assert valid[0].all()
    # the statistics: n whole episodes of lengths 3, 5, 7 with returns 6, 15, 28; solve for the counts
    n, total_return, total_length = (float(x) for x in episodes)
    c = (total_return - 6 * n - 4.5 * (total_length - 3 * n)) / 4
    b = (total_length - 3 * n) / 2 - 2 * c
    a = n - b - c
    assert n >= 6 and all(x >= 0 and x == int(x) for x in (a, b, c)) and c >= 1
    end_rewards = rewards[dones & valid]
    terminations = (end_rewards == 3) | (end_rewards == 5)
    assert terminations.any() and (~terminations).any()
    assert not (end_rewards[~terminations] == 7).any()  # 7 + gamma * V(final_obs), not the raw 7


def test_a_short_run_through_main(tmp_path):
    import subprocess

    root = Path(__file__).resolve().parents[2]
    # num_threads configures the pool: the gymnasium env of the evaluation must not receive it
    proc = subprocess.run([sys.executable, str(root / "main.py"), "--config", "cartpole-envpool",
                           "--set", "env.kwargs.num_threads=2",
                           "--total-timesteps", "4096", "--set", "run.eval_episodes=2", "--run-dir",
                           str(tmp_path / "run")], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": f"{STANDIN}{os.pathsep}{root}"}, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["env_steps"] == 4096 and summary["eval_episodes"] == 2
    saved = (tmp_path / "run" / "config.toml").read_text()
    assert 'backend = "envpool"' in saved


def test_without_the_extra_the_run_stops_with_the_pip_command(tmp_path):
    """main.py with ``import envpool`` failing (as where the extra is not installed)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    code = ("import runpy, sys; sys.modules['envpool'] = None; "  # None in sys.modules: ImportError on import
            f"sys.argv = ['main.py', '--config', 'cartpole-envpool', '--run-dir', {str(tmp_path / 'run')!r}]; "
            "runpy.run_path('main.py', run_name='__main__')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=root,
                          env={**os.environ, "PYTHONPATH": str(root)}, timeout=300)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and 'needs the envpool package; run: pip install -e ".[envpool]"' in lines[0]
    assert not (tmp_path / "run").exists() or not any((tmp_path / "run").iterdir())


def test_an_id_envpool_lacks_and_atari_are_refused(standin):
    from shell.envs import make_env

    with pytest.raises(ConfigError, match=r"env.backend = 'envpool' has no env 'ALE/Pong-v5'"):
        make_env(counting_config(id="ALE/Pong-v5").env, torch.device("cpu"))
    from shell.envs import check_config

    with pytest.raises(ConfigError, match=r"env.atari runs on env.backend = 'ale' or 'gymnasium', not 'envpool'"):
        check_config(counting_config(atari=True).env)


def test_the_pool_is_seeded_from_the_reset_seed(standin):
    """EnvPool seeds sub-env i with seed + i when it builds the pool and ignores reset(seed=...):
    the backend rebuilds the pool at reset, so run.seed (and the rank offset) seed it."""
    import warnings

    from shell.envs import make_env

    cfg = counting_config(id="CartPole-v1", num_envs=3).env
    first, again, other = (make_env(cfg, torch.device("cpu")) for _ in range(3))
    with warnings.catch_warnings():
        warnings.filterwarnings("error", message="EnvPool seeds are fixed")
        obs5 = first.reset(seed=5)
        assert torch.equal(obs5, again.reset(seed=5))  # the same seed, the same initial states
        obs6 = other.reset(seed=6)
    assert torch.equal(obs6[:-1], obs5[1:])  # sub-env i of seed 6 is sub-env i + 1 of seed 5
    assert not torch.equal(obs6, obs5)
    assert torch.equal(first.reset(seed=6), obs6)  # a reset with a new seed rebuilds the pool


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"num_threads": -1}, r"env.kwargs.num_threads = -1: EnvPool needs an int >= 0"),
    ({"thread_affinity_offset": "x"}, r"env.kwargs.thread_affinity_offset = 'x': EnvPool needs an int >= -1"),
    ({"batch_size": 2}, r"env.kwargs.batch_size = 2: every sub-env steps .* must be 0 or env.num_envs \(3\)"),
    ({"seed": 5}, r"env.kwargs.seed: the envpool backend seeds its pool from run.seed"),
])
def test_pool_options_envpool_would_abort_on_are_refused(standin, kwargs, message):
    from shell.envs import make_env

    with pytest.raises(ConfigError, match=message):
        make_env(counting_config(kwargs=kwargs).env, torch.device("cpu"))


def test_an_eval_env_gymnasium_cannot_build_stops_the_run_before_training(standin, tmp_path, monkeypatch):
    """Runs on EnvPool are evaluated on gymnasium's env of the same id: if that cannot be built (a
    missing extra), the run stops at start-up with one line, not after training."""
    import attrs

    import shell.envs.registry

    real_make_env = shell.envs.registry.make_env

    def make_env(cfg, device, num_envs=None, *args, **kwargs):
        if cfg.backend == "gymnasium":
            raise ConfigError('env needs a missing optional dependency; run: pip install -e ".[mujoco]"')
        return real_make_env(cfg, device, num_envs, *args, **kwargs)

    monkeypatch.setattr(shell.envs.registry, "make_env", make_env)
    config = counting_config()
    config = attrs.evolve(config, run=attrs.evolve(config.run, eval_episodes=2))
    with pytest.raises(ConfigError, match=r"pip install -e \"\.\[mujoco\]\"; runs on env.backend = 'envpool' are "
                       r"evaluated on gymnasium's env of the same id \(or set run.eval_episodes = 0\)"):
        Trainer(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()
    with pytest.raises(ConfigError, match="needs a missing optional dependency"):
        shell.envs.registry.check_eval_env(config.env, torch.device("cpu"))
    config = attrs.evolve(config, run=attrs.evolve(config.run, eval_episodes=0))  # no evaluation, no check
    Trainer(config, tmp_path / "run0").env.close()
