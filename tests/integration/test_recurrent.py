"""Recurrent policies (LSTM/GRU): the reset rule, replay equality, a memory task, resume and eval."""

import json
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import tests.integration.custom_envs  # noqa: F401 - registers Cue-v0, Counting-v0
from shell.config import config_from_dict
from shell.inference import load_policy
from shell.policies.recurrent import RecurrentCore
from shell.runner import Trainer


def reference_rnn(core: RecurrentCore, x: torch.Tensor, state: torch.Tensor, start: torch.Tensor):
    """Row by row, step by step, with the reset rule written out: a plain loop over nn.LSTMCell/GRUCell."""
    rnn = core.rnn
    cell = (torch.nn.LSTMCell if core.kind == "lstm" else torch.nn.GRUCell)(rnn.input_size, rnn.hidden_size)
    cell.weight_ih.data.copy_(rnn.weight_ih_l0)
    cell.weight_hh.data.copy_(rnn.weight_hh_l0)
    cell.bias_ih.data.copy_(rnn.bias_ih_l0)
    cell.bias_hh.data.copy_(rnn.bias_hh_l0)
    L, B = start.shape
    out = torch.zeros(L, B, rnn.hidden_size)
    final = torch.zeros_like(state)
    for b in range(B):
        s = state[b:b + 1].clone()
        for t in range(L):
            if start[t, b]:
                s = torch.zeros_like(s)
            if core.kind == "lstm":
                h, c = cell(x[t, b:b + 1], tuple(s.chunk(2, dim=-1)))
                s = torch.cat((h, c), dim=-1)
            else:
                h = s = cell(x[t, b:b + 1], s)
            out[t, b] = h[0]
        final[b] = s[0]
    return out, final


@pytest.mark.parametrize("kind", ["lstm", "gru"])
def test_state_restarts_exactly_at_episode_starts_and_never_leaks(kind):
    torch.manual_seed(0)
    core = RecurrentCore(kind, 3, 5)
    L, B = 12, 4
    x = torch.randn(L, B, 3)
    state = torch.randn(B, core.state_size)
    start = torch.rand(L, B) < 0.2
    start[0, 0] = True
    start[5, 2] = True
    with torch.no_grad():
        out, final = core(x, state, start)
        ref_out, ref_final = reference_rnn(core, x, state, start)
        torch.testing.assert_close(out, ref_out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(final, ref_final, atol=1e-5, rtol=1e-5)
        # one step at a time (the rollout's path) gives the same
        s, steps = state, []
        for t in range(L):
            o, s = core(x[t:t + 1], s, start[t:t + 1])
            steps.append(o[0])
        torch.testing.assert_close(torch.stack(steps), out, atol=1e-5, rtol=1e-5)
        # nothing leaks across rows: changing row 1's inputs and state leaves the others alone
        x2, state2 = x.clone(), state.clone()
        x2[:, 1] += 5.0
        state2[1] -= 3.0
        out2, _ = core(x2, state2, start)
        keep = [0, 2, 3]
        torch.testing.assert_close(out2[:, keep], out[:, keep])
        assert not torch.allclose(out2[:, 1], out[:, 1])
        # after a restart, the state before it does not matter
        state3 = state.clone()
        state3[2] += 10.0
        out3, _ = core(x, state3, start)
        torch.testing.assert_close(out3[5:, 2], out[5:, 2])


def recurrent_config(env_id: str, seq_len: int, **policy):
    return config_from_dict({
        "env": {"id": env_id, "num_envs": 3, "normalize_obs": True, "normalize_reward": True},
        "policy": {"recurrent": "lstm", "rnn_hidden_size": 8, "hidden_sizes": [16], "seq_len": seq_len, **policy},
        "ppo": {"num_steps": 16, "num_minibatches": 3 if seq_len else 1, "update_epochs": 1},
        "run": {"total_timesteps": 48, "eval_episodes": 0, "checkpoint_every": 0}})


@pytest.mark.parametrize("seq_len", [0, 4])
@pytest.mark.parametrize("share_rnn", [False, True])
def test_update_replays_the_step_by_step_rollout(tmp_path: Path, seq_len: int, share_rnn: bool):
    """Counting-v0 has terminations (3, 5 steps) and truncations (7 steps) in every 16-step rollout."""
    trainer = Trainer(recurrent_config("Counting-v0", seq_len, share_rnn=share_rnn), tmp_path)
    obs = trainer.env.reset(seed=0)
    trainer.lanes.restart(trainer.env)
    for _ in range(2):  # the second rollout starts from carried states, mid-episode
        obs, _ = trainer.collect(obs)
    st = trainer.lanes.only.storage
    assert st.dones.any() and st.episode_starts[1:].any() and not st.episode_starts[0].all()
    assert st.states[0].abs().sum() > 0  # carried over from the first rollout
    with torch.no_grad():
        for mb in st.sequence_minibatches(3 if seq_len else 1, seq_len or st.num_steps):
            log_prob, _, value = trainer.agent.evaluate_sequences(mb["obs"], mb["raw_actions"], mb["states"],
                                                                  mb["episode_starts"])
            torch.testing.assert_close(log_prob, mb["log_probs"], atol=1e-5, rtol=0)
            torch.testing.assert_close(value, mb["values"], atol=1e-5, rtol=0)
    # every step appears in exactly one minibatch
    stored = torch.cat([mb["log_probs"] for mb in st.sequence_minibatches(3 if seq_len else 1,
                                                                         seq_len or st.num_steps)])
    torch.testing.assert_close(stored.sort().values, st.log_probs.flatten().sort().values, atol=0, rtol=0)


def test_truncation_bootstrap_uses_the_ended_episodes_state(tmp_path: Path, monkeypatch):
    trainer = Trainer(recurrent_config("Counting-v0", 0), tmp_path)
    calls = []
    original = trainer.agent.value_step

    def spy(obs, state, episode_start=None):
        calls.append((state.clone(), episode_start))
        return original(obs, state, episode_start)

    monkeypatch.setattr(trainer.agent, "value_step", spy)
    obs = trainer.env.reset(seed=2)  # phase 2 in env 0: truncated at step 7
    trainer.collect(obs)
    st = trainer.lanes.only.storage
    bootstrap = [c for c in calls if c[1] is None]
    assert bootstrap, "no truncation bootstrap was computed"
    # the state passed is the one after the last step of the ended episode: not zero, not reset
    assert all(state.abs().sum() > 0 for state, _ in bootstrap)
    assert st.states.shape == (16, 3, trainer.agent.initial_state(1).shape[1])


def cue_config(recurrent: str, seed: int):
    return config_from_dict({
        "env": {"id": "Cue-v0", "num_envs": 8},
        "policy": {"recurrent": recurrent, "rnn_hidden_size": 16, "hidden_sizes": [32]},
        "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 4, "learning_rate": 3e-3, "gamma": 0.99},
        "run": {"seed": seed, "total_timesteps": 12_288, "eval_episodes": 60, "checkpoint_every": 0}})


def test_memory_task_needs_the_lstm(tmp_path: Path):
    lstm = Trainer(cue_config("lstm", 0), tmp_path / "lstm").train()
    plain = Trainer(cue_config("none", 0), tmp_path / "plain").train()
    assert lstm["eval_return_mean"] >= 0.9, lstm
    assert plain["eval_return_mean"] <= 0.5, plain


def test_resume_eval_and_load_policy_of_a_recurrent_run(tmp_path: Path, main):
    run = tmp_path / "run"
    args = ["--config", "cartpole", "--set", "env.id='CartPoleNoVel-v1'", "--set", "policy.recurrent='gru'",
            "--set", "env.num_envs=4", "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2",
            "--set", "run.checkpoint_every=1", "--set", "run.eval_episodes=3", "--total-timesteps", "256"]
    first = main(*args, "--run-dir", str(run))
    assert first.returncode == 0, first.stderr
    resumed = main("--resume", str(run), "--total-timesteps", "512")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.loads(resumed.stdout.splitlines()[-1])
    assert summary["env_steps"] == 512 and summary["eval_episodes"] == 3
    evaluated = main("eval", str(run), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr
    assert json.loads(evaluated.stdout.splitlines()[-1])["eval_episodes"] == 2

    policy = load_policy(run)
    assert policy.recurrent
    env = gym.make("CartPoleNoVel-v1")
    obs, _ = env.reset(seed=5)
    first_actions = []
    for _ in range(20):
        action = policy(obs)
        first_actions.append(int(action))
        obs, _, terminated, truncated, _ = env.step(action)
        if terminated or truncated:
            break
    assert policy.state is not None and policy.state.abs().sum() > 0
    # the same episode again after reset() gives the same actions: the state restarted
    policy.reset()
    obs, _ = env.reset(seed=5)
    again = []
    for _ in range(len(first_actions)):
        action = policy(obs)
        again.append(int(action))
        obs, *_ = env.step(action)
    assert again == first_actions
    # a batch of 2 envs: rows are independent envs
    batch = np.stack([env.observation_space.sample(), env.observation_space.sample()])
    assert policy(batch).shape == (2,)
