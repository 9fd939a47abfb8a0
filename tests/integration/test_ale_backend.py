"""``env.backend = "ale"``: ale-py's C++ AtariVectorEnv doing the Atari chain, against gymnasium's chain."""

import json

import attrs
import pytest
import torch

from shell.config import config_from_dict
from shell.envs import GymVecEnv, make_env
from shell.envs.ale import ale_vector_options
from shell.errors import ConfigError
from shell.runner import Trainer

CPU = torch.device("cpu")
CUSTOM = "tests.integration.custom_envs"


def atari_config(env_id: str = "ALE/Pong-v5", backend: str = "ale", **env) -> dict:
    return config_from_dict({
        "env": {"id": env_id, "num_envs": 2, "atari": True, "sign_reward": True, "backend": backend,
                "kwargs": {"frameskip": 1}, **env},
        "policy": {"hidden_sizes": [], "cnn": "nature", "activation": "relu"},
        "ppo": {"num_steps": 64, "num_minibatches": 2, "update_epochs": 1},
        "run": {"total_timesteps": 128, "eval_episodes": 0, "device": "cpu"}})


def random_actions(n: int, num_envs: int, seed: int = 0) -> list[torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.randint(0, 4, (num_envs,), generator=gen) for _ in range(n)]


# ----------------------------------------------------------------------------- the same env as the chain
def test_options_come_from_the_registered_id_and_env_kwargs():
    cfg = atari_config().env
    assert ale_vector_options(cfg) == ("pong", {"repeat_action_probability": 0.25, "full_action_space": False,
                                                "max_num_frames_per_episode": 108000})
    no_sticky = attrs.evolve(cfg, id="PongNoFrameskip-v4", kwargs={})
    assert ale_vector_options(no_sticky)[1]["repeat_action_probability"] == 0.0
    mine = attrs.evolve(cfg, kwargs={"frameskip": 1, "repeat_action_probability": 0.1, "full_action_space": True})
    assert ale_vector_options(mine)[1] == {"repeat_action_probability": 0.1, "full_action_space": True,
                                           "max_num_frames_per_episode": 108000}


@pytest.mark.parametrize(("change", "message"), [
    ({"kwargs": {"frameskip": 1, "mode": 1}}, "env.kwargs key 'mode' is not supported by env.backend = 'ale'"),
    ({"kwargs": {"frameskip": 4}}, "env.kwargs.frameskip = 4 is not supported"),
    ({"id": "CartPole-v1", "kwargs": {}}, "needs an ALE id such as 'ALE/Pong-v5', not 'CartPole-v1'"),
])
def test_what_the_vector_env_cannot_do_is_refused(change, message):
    with pytest.raises(ConfigError, match=message):
        ale_vector_options(attrs.evolve(atari_config().env, **change))


@pytest.mark.parametrize(("env", "message"), [
    ({"atari": False}, "env.backend = 'ale' runs the Atari chain and needs env.atari = true"),
    ({"max_episode_steps": 100}, "env.max_episode_steps does not apply to env.backend = 'ale'"),
])
def test_the_backend_refuses_what_it_cannot_serve(env, message):
    from shell.envs import check_config

    with pytest.raises(ConfigError, match=message):
        check_config(atari_config(**env).env)


def test_spaces_and_scores_match_the_gymnasium_chain():
    """Same observation and action spaces; rewards are the game score (SpaceInvaders pays 5-30 a kill)."""
    envs = {b: make_env(atari_config("ALE/SpaceInvaders-v5", backend=b).env, CPU) for b in ("gymnasium", "ale")}
    try:
        gym_env, ale_env = envs["gymnasium"], envs["ale"]
        assert isinstance(ale_env, GymVecEnv) and not ale_env.next_step  # SAME_STEP, as the chain
        assert ale_env.observation_space == gym_env.observation_space  # Box(0, 255, (4, 84, 84), uint8)
        assert ale_env.action_space == gym_env.action_space
        rewards = {}
        for backend, env in envs.items():
            env.reset(seed=0)
            rewards[backend] = torch.cat([env.step(a).reward for a in random_actions(300, 2)])
        for got in rewards.values():  # unclipped: the score of each kill
            assert got.max() >= 5 and set(got.unique().tolist()) <= {0, 5, 10, 15, 20, 25, 30, 200}
    finally:
        for env in envs.values():
            env.close()


def test_truncation_returns_the_ended_episodes_last_frames():
    """``max_num_frames_per_episode = 400``: 100 agent steps. The bootstrap gets the ended episode's last
    stack; the observation returned beside it is the new episode's first (zero-padded) stack."""
    env = make_env(atari_config(kwargs={"frameskip": 1, "max_num_frames_per_episode": 400}).env, CPU)
    try:
        env.reset(seed=0)
        steps = 0
        for action in random_actions(120, 2):
            step, steps = env.step(action), steps + 1
            if step.truncated.any():
                break
        assert step.truncated.all() and not step.terminated.any() and steps <= 100  # the no-ops count as frames
        assert step.final_obs is not None and step.final_obs.dtype == torch.uint8
        assert step.obs[:, :3].eq(0).all()  # the reset stack: three zero frames, then the first one
        assert step.final_obs[:, :3].flatten(1).amax(1).gt(0).all()  # the last frames of the ended game
        assert step.episode_done.all() and step.episode_length.eq(steps).all()
    finally:
        env.close()


def test_life_loss_ends_training_episodes_but_not_the_game():
    """Breakout: a lost life is a training termination, and the next observation continues the game."""
    env = make_env(atari_config("ALE/Breakout-v5", terminal_on_life_loss=True).env, CPU)
    try:
        env.reset(seed=0)
        for action in random_actions(400, 2):
            step = env.step(action)
            lost = step.terminated & ~step.episode_done if step.episode_done is not None else step.terminated
            if lost.any():
                break
        assert lost.any(), "no life was lost in 400 random steps"
        assert step.obs[lost, :3].flatten(1).amax(1).gt(0).all()  # not a reset stack: the game goes on
    finally:
        env.close()


# ----------------------------------------------------------------------------- training through it
def test_shared_encoder_rollout_stores_what_the_update_recomputes(tmp_path):
    """A shared Nature CNN computes log pi_old and V(s_t) in the step's own pass; before any update
    they equal a fresh batched pass over the stored rollout."""
    cfg = atari_config(f"{CUSTOM}:StubAtari-v0", backend="gymnasium", kwargs={})
    trainer = Trainer(cfg, tmp_path)
    assert trainer.agent.values_in_step
    obs = trainer.env.reset(seed=0)
    trainer.collect(obs)
    st = trainer.lanes.only.storage
    with torch.no_grad():
        log_prob, value = trainer.agent.log_prob_and_value(st.obs.flatten(0, 1), st.raw_actions.flatten(0, 1))
    torch.testing.assert_close(log_prob, st.log_probs.flatten(), atol=1e-5, rtol=0)
    torch.testing.assert_close(value, st.values.flatten(), atol=1e-5, rtol=0)
    assert st.values.abs().sum() > 0


def test_short_pong_run_on_the_ale_backend(main, tmp_path):
    """Trains on the C++ env, evaluates on gymnasium's chain (as the torch backend does), resumes."""
    run = tmp_path / "run"
    proc = main("--config", "pong", "--set", "env.backend=ale", "--total-timesteps", "1024",
                "--set", "run.eval_episodes=1", "--set", "run.eval_max_episode_steps=100", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    assert summary["env_steps"] == 1024 and summary["eval_truncated_episodes"] == 1
    state = torch.load(summary["checkpoint"], weights_only=True)
    assert state["config"]["env"]["backend"] == "ale"
    resumed = main("--resume", str(run), "--total-timesteps", "2048")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert json.loads(resumed.stdout.strip().splitlines()[-1])["env_steps"] == 2048


def test_a_bad_kwarg_is_one_line_and_leaves_no_run_dir(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "pong", "--set", "env.backend=ale", "--set", "env.kwargs={frameskip = 1, mode = 3}",
                "--run-dir", str(run))
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "env.kwargs key 'mode' is not supported by env.backend = 'ale'" in lines[0]
    assert not run.exists() or not any(run.iterdir())

