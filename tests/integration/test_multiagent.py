"""Several agents in one env (env.backend = "pettingzoo"): rows per agent, agents that leave mid-episode,
agent ids, centralised critics, masks per agent, bad input, resume, eval and a short simple_spread run."""

from __future__ import annotations

import csv
import json
import os
import re

import numpy as np
import pytest
import torch
from pettingzoo import ParallelEnv

from shell.api import train
from shell.config import load_config
from shell.envs import Rows, make_lanes
from shell.errors import ConfigError, TrainingError
from shell.inference import load_policy
from shell.observations import CRITIC_KEY
from shell.runner import Trainer

from .conftest import ROOT, run_main
from .multiagent_envs import Mixed, Relay

RELAY = "tests.integration.multiagent_envs"
BASE = {"env.backend": "pettingzoo", "env.id": RELAY, "env.num_envs": 2, "ppo.num_steps": 12,
        "ppo.num_minibatches": 2, "ppo.update_epochs": 2, "policy.hidden_sizes": [16], "run.eval_episodes": 3,
        "run.total_timesteps": 48, "run.loggers": []}


def config(**overrides):
    return load_config(None, {**BASE, **overrides})


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def test_rows_are_agents_and_gone_agents_are_not_valid():
    """3 agents living 2, 4 and 6 steps in 2 copies: 6 rows, copy-major; a row is valid exactly while its agent
    lives, its reward is the agent's own, and the copy resets when the last agent leaves."""
    env = make_lanes(config().env, torch.device("cpu"), policy=config().policy)
    try:
        (group, spec), = env.lanes.items()
        assert (spec.num_envs, spec.rows_per_copy, env.copies) == (6, 3, 2)
        rows = env.reset(seed=0)[group]
        lifetimes = [2, 4, 6]
        for t in range(12):
            valid = rows.valid.numpy().reshape(2, 3)
            expected = np.array([(t % 6) < life for life in lifetimes])
            assert (valid == expected).all(), (t, valid)
            step = env.step({group: torch.zeros(6, dtype=torch.long)})[group]
            rows = Rows(step.obs, step.valid, step.action_mask)
            assert step.ended.tolist() == [t % 6 == 5] * 2
            reward = step.reward.numpy().reshape(2, 3)
            assert (reward == np.where(expected, [1.0, 2.0, 3.0], 0.0)).all()
            ended = step.terminated.numpy().reshape(2, 3)
            assert (ended == (expected & np.array([(t % 6) + 1 == life for life in lifetimes]))).all()
            if t % 6 == 5:  # the last agent left: the copy reset, and the team's return is reported once per copy
                assert step.episode_done.numpy().reshape(2, 3)[:, 0].all()
                assert (step.episode_return.numpy().reshape(2, 3)[:, 0] == 2 * 1 + 4 * 2 + 6 * 3).all()
                assert step.episode_start.all()
    finally:
        env.close()


def test_no_transition_of_a_gone_agent_is_used(tmp_path):
    """The rollout stores exactly the agents' living steps as valid rows, only those enter the minibatches and
    the observation statistics, and the training episode return is the team's exact return (28)."""
    cfg = config(**{"env.normalize_obs": True})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        obs = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        count_before = float(trainer.agent.obs_normalizer.moments.count)
        _, episodes = trainer.collect(obs)
        valid = trainer.lanes.only.storage.valid
        assert int(valid.sum()) == 2 * (2 + 4 + 6) * 2  # 12 steps = two whole episodes in each of 2 copies
        per_row = valid.sum(0).view(2, 3)
        assert per_row.tolist() == [[4, 8, 12], [4, 8, 12]]
        assert float(trainer.agent.obs_normalizer.moments.count) - count_before == int(valid.sum())
        rows = sum(len(mb["advantages"]) for mb in trainer.lanes.only.storage.minibatches(2))
        assert rows == int(valid.sum())
        count, total, _ = trainer.lanes.episode_totals(episodes).tolist()
        assert count == 4 and total == 4 * 28.0
        assert (trainer.lanes.only.storage.rewards[~valid] == 0).all()
    finally:
        trainer.env.close()


def test_relay_through_main_reports_exact_team_and_per_agent_returns(tmp_path):
    args = ["--config", "cartpole", "--run-dir", str(tmp_path / "run")]
    for key, value in BASE.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    proc = run_main(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["eval_return_mean"] == 28.0
    assert summary["eval_return_per_agent"] == pytest.approx(28.0 / 3)
    assert summary["eval_episodes"] == 3 and summary["env_steps"] == 48
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert [float(r["episodic_return"]) for r in rows] == [28.0] * 2  # 24 joint steps per update
    # eval of the checkpoint gives the same, and resume continues the run by one update
    proc = run_main("eval", str(tmp_path / "run"), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval_return_mean"] == 28.0
    proc = run_main("--resume", str(tmp_path / "run"), "--total-timesteps", "72")
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(tmp_path / "run" / "metrics.csv") as f:
        assert [int(r["update"]) for r in csv.DictReader(f)] == [1, 2, 3]


def test_agent_id_and_centralised_critics():
    """agent_id appends the one-hot index; 'concat' and 'state' give the critic a Dict key of its own that the
    actor never sees, with the agent's index after the shared part."""
    device = torch.device("cpu")
    env = make_lanes(config().env, device, policy=config(**{"policy.agent_id": True}).policy)
    obs = env.reset(seed=0)["runner"].obs
    assert obs.shape == (6, 6) and (obs[:, 3:] == torch.eye(3).repeat(2, 1)).all()
    env.close()
    for critic, size in (("concat", 3 * 3 + 3), ("state", 2 * 3 + 3)):
        cfg = config(**{"policy.critic": critic})
        env = make_lanes(cfg.env, device, policy=cfg.policy)
        obs = env.reset(seed=0)["runner"].obs
        assert obs["obs"].shape == (6, 3) and obs[CRITIC_KEY].shape == (6, size)
        assert (obs[CRITIC_KEY][:, -3:] == torch.eye(3).repeat(2, 1)).all()
        if critic == "concat":  # every row of a copy sees the copy's three observations in agent order
            assert (obs[CRITIC_KEY][0, :9] == obs["obs"][0:3].flatten()).all()
            assert (obs[CRITIC_KEY][1, :9] == obs[CRITIC_KEY][0, :9]).all()
        env.close()


def _three_steps_to_a_time_limit(critic: str):
    """Relay (runner lifetimes 2, 4, 6) in 2 copies with env.max_episode_steps = 3: runner_0 leaves at step 2;
    at step 3 the limit truncates runner_1 and runner_2 and both copies reset (SAME_STEP). Step 3's result."""
    cfg = config(**{"policy.critic": critic, "env.max_episode_steps": 3})
    env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    try:
        env.reset(seed=0)
        for _ in range(3):
            step = env.step({"runner": torch.ones(6, dtype=torch.long)})["runner"]
    finally:
        env.close()
    assert step.ended.tolist() == [True, True]
    assert step.truncated.view(2, 3).tolist() == [[False, True, True]] * 2
    return step


def test_a_truncated_agents_final_observation_carries_the_state_of_its_last_step():
    """A truncated agent's value target bootstraps from V(final observation). With policy.critic = "state" the
    critic's part of that observation is the env's state() after the step that ended the episode (every
    agent's [alive, t / 10] at t = 3), not the state of the next episode's reset, which the copy's rows
    observe next."""
    step = _three_steps_to_a_time_limit("state")
    truncated = step.truncated
    final = step.final_obs[CRITIC_KEY][truncated][:, :6]
    assert torch.allclose(final, torch.tensor([0.0, 0.3, 1.0, 0.3, 1.0, 0.3]).expand(4, 6))
    after_reset = step.obs[CRITIC_KEY][truncated][:, :6]
    assert torch.allclose(after_reset, torch.tensor([1.0, 0.0] * 3).expand(4, 6))
    assert torch.equal(step.final_obs[CRITIC_KEY][truncated][:, 6:], torch.eye(3)[[1, 2, 1, 2]])


def test_a_truncated_agents_final_concat_observation_is_of_its_last_step():
    """The same for policy.critic = "concat": the final observation's critic part holds the agents'
    observations of the step that ended the episode ([t / 10, i / 3, 1] at t = 3), not the reset's."""
    step = _three_steps_to_a_time_limit("concat")
    truncated = step.truncated
    final = step.final_obs[CRITIC_KEY][truncated][:, 3:9]
    expected = torch.tensor([0.3, 1 / 3, 1.0, 0.3, 2 / 3, 1.0])
    assert torch.allclose(final, expected.expand(4, 6))
    assert torch.allclose(step.final_obs["obs"][truncated], expected.view(2, 3).repeat(2, 1))
    assert torch.allclose(step.obs[CRITIC_KEY][truncated][:, 3:9], torch.tensor([0.0, 1 / 3, 1.0, 0.0, 2 / 3, 1.0]))


def test_a_gone_agent_enters_the_concat_critic_as_zeros():
    """policy.critic = "concat": while an agent is not valid (it has left, until its copy resets) its part of
    every row's critic input is zeros, not its last observation; a valid agent's part is its observation.
    Also in a final observation: runner_0 left before the step that truncated the others."""
    cfg = config(**{"policy.critic": "concat"})
    env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    try:
        env.reset(seed=0)
        gone_seen = 0
        for _ in range(5):  # lifetimes 2, 4, 6: runner_0 leaves at step 2, runner_1 at step 4
            step = env.step({"runner": torch.ones(6, dtype=torch.long)})["runner"]
            parts = step.obs[CRITIC_KEY][:, :9].view(2, 3, 3, 3)  # copy, row, agent, its observation
            own = step.obs["obs"].view(2, 3, 3)
            for agent, valid in enumerate(step.valid.view(2, 3)[0].tolist()):
                expected = own[:, agent] if valid else torch.zeros(2, 3)
                assert torch.equal(parts[:, :, agent], expected[:, None].expand(2, 3, 3)), (agent, parts)
                gone_seen += not valid
        assert gone_seen == 4 + 2  # runner_0 after steps 2 to 5, runner_1 after steps 4 and 5
    finally:
        env.close()
    step = _three_steps_to_a_time_limit("concat")
    assert torch.equal(step.final_obs[CRITIC_KEY][step.truncated][:, :3], torch.zeros(4, 3))


@pytest.mark.parametrize("critic", ["local", "state", "concat"])
def test_each_critic_trains_and_the_actor_ignores_the_critic_input(tmp_path, critic):
    result = train(config=config(**{"policy.critic": critic, "policy.agent_id": True}), run_dir=tmp_path / "run",
                   progress=False)
    assert result.summary["eval_return_mean"] == 28.0
    agent = result.policy.agent
    if critic != "local":
        assert agent.critic_encoder is not None
        env = make_lanes(result.config.env, torch.device("cpu"), policy=result.config.policy)
        obs = env.reset(seed=0)["runner"].obs
        env.close()
        changed = {**obs, CRITIC_KEY: obs[CRITIC_KEY] + 100.0}
        with torch.no_grad():
            assert torch.equal(agent.act(obs), agent.act(changed))
            assert not torch.equal(agent.value(obs), agent.value(changed))


@pytest.mark.parametrize("where", ["info", "obs"])
def test_masks_per_agent_never_send_an_illegal_action(tmp_path, where):
    """Relay raises on an illegal action; each agent's mask (its info, or its Dict observation's key) keeps every
    action legal in training, evaluation and load_policy; the obs key never reaches the encoder."""
    result = train(config=config(**{"env.kwargs": {"mask": where}, "run.total_timesteps": 96}),
                   run_dir=tmp_path / "run", progress=False)
    assert result.summary["eval_return_mean"] == 28.0
    assert result.policy.agent.action_mask_source == where
    if where == "obs":
        assert set(result.policy.agent.observation_space.spaces) == {"observation"}
        policy, env = load_policy(tmp_path / "run"), Relay(mask="obs")
        obs, _ = env.reset()
        while env.agents:  # the env raises on an illegal action
            obs, *_ = env.step(policy({a: obs[a] for a in env.agents}))


def test_load_policy_maps_an_agent_dict_to_an_action_dict(tmp_path):
    result = train(config=config(**{"policy.agent_id": True}), run_dir=tmp_path / "run", progress=False)
    policy = load_policy(tmp_path / "run")
    env = Relay()
    obs, _ = env.reset()
    actions = policy(obs)
    assert set(actions) == set(obs) and all(0 <= int(a) < 3 for a in actions.values())
    env.step(actions)
    del result


@pytest.mark.parametrize(("overrides", "message"), [
    ({"env.groups": {"a": ["runner_0", "runner_1"]}}, "env.groups leave out ['runner_2']"),
    ({"env.groups": {"a": ["runner_0", "nobody"]}}, "names 'nobody'"),
    ({"env.id": "json"}, "neither parallel_env\\(\\) nor env\\(\\)"),
    ({"env.wrappers": [{"class": "gymnasium.wrappers:ClipReward"}]}, "env.wrappers need env.backend"),
])
def test_bad_multiagent_input_is_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace("]", r"\]")) as info:
        train(config=config(**overrides), run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value)


def test_state_critic_needs_state(tmp_path):
    class NoState(Relay):
        state = ParallelEnv.state  # PettingZoo's own, which raises NotImplementedError

    with pytest.raises(ConfigError, match="needs an env with state"):
        train(config=config(**{"policy.critic": "state"}), env=lambda: NoState(), run_dir=tmp_path / "run",
              progress=False)


def test_eval_video_of_a_multiagent_run(tmp_path):
    train(config=config(), run_dir=tmp_path / "run", progress=False)
    proc = run_main("eval", str(tmp_path / "run"), "--episodes", "2", "--video")
    assert proc.returncode == 0, proc.stderr[-2000:]
    videos = last_json(proc.stdout)["videos"]
    assert len(videos) == 1 and videos[0].endswith("-episode-0.mp4")


def test_simple_spread_through_main(tmp_path):
    proc = run_main("--config", "simple-spread", "--total-timesteps", "3200", "--set", "run.eval_episodes=4",
                    "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["env_steps"] == 3200 and summary["eval_episodes"] == 4
    assert summary["eval_return_mean"] == pytest.approx(3 * summary["eval_return_per_agent"])
    versions = json.loads((tmp_path / "run" / "versions.json").read_text())
    assert versions["pettingzoo"] and versions["mpe2"]  # the env's packages, recorded with the run
    # the progress bar's last line is printed once (its segments are separated by carriage returns)
    assert sum("100%" in part for part in proc.stderr.replace("\r", "\n").splitlines()) == 1


MIXED = {"env.kwargs": {"kind": "mixed"}}


def test_groups_with_different_spaces_train_export_resume_and_load(tmp_path):
    """Runners and a scout (other spaces) form two groups by default, a policy each; the team return sums both
    groups exactly; export writes one file per group; load_policy maps every agent; a resume continues."""
    run = tmp_path / "run"
    rows = []
    result = train(config=config(**MIXED), run_dir=run, progress=False, callbacks=[rows.append])
    assert set(result.policy.agent) == {"runner", "scout"}
    assert result.summary["eval_return_mean"] == 2 * 1 + 4 * 2 + 5 * 10
    assert result.summary["eval_return_per_agent"] == pytest.approx(60 / 3)
    assert result.summary["eval_return_per_group"] == {"runner": 10.0, "scout": 50.0}
    with open(run / "metrics.csv") as f:
        assert [float(r["episodic_return"]) for r in csv.DictReader(f)] == [60.0] * 2
    env = Mixed()
    obs, _ = env.reset()
    actions = load_policy(run)(obs)
    assert set(actions) == {"runner_0", "runner_1", "scout_0"} and np.shape(actions["scout_0"]) == (2,)
    env.step(actions)
    proc = run_main("export", str(run), "--format", "pt2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    exports = last_json(proc.stdout)["exports"]
    assert set(exports) == {"runner", "scout"}
    assert all(e["checked_max_abs_diff"] == 0.0 for e in exports.values())
    proc = run_main("--resume", str(run), "--total-timesteps", "72")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval_return_mean"] == 60.0
    with open(run / "metrics.csv") as f:
        assert [int(r["update"]) for r in csv.DictReader(f)] == [1, 2, 3]
    # each lane's own metrics: metrics.<group>.csv, one row per update across the resume, and the run's row is
    # the mean over the lanes
    for group in ("runner", "scout"):
        with open(run / f"metrics.{group}.csv") as f:
            lane = list(csv.DictReader(f))
        assert [int(r["update"]) for r in lane] == [1, 2, 3]
        assert list(lane[0])[:2] == ["update", "env_steps"] and "approx_kl" in lane[0]
        assert float(lane[0]["policy_loss"]) == pytest.approx(rows[0][f"{group}/policy_loss"])
    assert float(lane[0]["episodic_return"]) == 50.0  # the scout's 5 steps of 10
    for key in ("policy_loss", "entropy", "approx_kl"):
        assert rows[0][key] == pytest.approx((rows[0][f"runner/{key}"] + rows[0][f"scout/{key}"]) / 2)


def test_a_run_of_one_lane_writes_no_lane_files(tmp_path):
    train(config=config(), run_dir=tmp_path / "run", progress=False)
    assert sorted(p.name for p in (tmp_path / "run").glob("metrics*.csv")) == ["metrics.csv"]


def test_a_group_of_differing_spaces_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="differ in observation space") as info:
        train(config=config(**MIXED, **{"env.groups": {"all": ["runner_0", "runner_1", "scout_0"]}}),
              run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


def test_torchrun_trains_groups_with_identical_parameters_on_both_ranks(tmp_path):
    """Two ranks of a two-group run: one summary, world_size 2, the exact team return, and the global step
    count (2 ranks x 2 copies x 12 steps per update)."""
    from .test_distributed import torchrun

    args = ["--config", "cartpole", "--run-dir", str(tmp_path / "run")]
    for key, value in BASE.items():
        args += ["--set", f"{key}={json.dumps(value)}"]
    args += ["--set", 'env.kwargs={ kind = "mixed" }']
    proc = torchrun(str(ROOT / "main.py"), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1 and summaries[0]["world_size"] == 2
    assert summaries[0]["eval_return_mean"] == 60.0 and summaries[0]["env_steps"] == 48


def test_discrete_observations_and_a_time_limit_of_our_own(tmp_path):
    """Discrete observations are one-hot rows (each action a scalar, as the env checks); env.max_episode_steps = 3
    truncates every agent at step 3: returns 1 * 2 + 2 * 3 + 3 * 3 = 17, the evaluation capped at 3 steps."""
    cfg = config(**{"env.kwargs": {"discrete_obs": True}, "env.max_episode_steps": 3})
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    assert result.summary["eval_return_mean"] == 17.0
    assert result.summary["eval_max_episode_steps"] == 3
    with open(tmp_path / "run" / "metrics.csv") as f:
        rows = list(csv.DictReader(f))
    assert {float(r["episodic_return"]) for r in rows} == {17.0}
    assert {float(r["episodic_length"]) for r in rows} == {3.0}
    policy, env = load_policy(tmp_path / "run"), Relay(discrete_obs=True)
    obs, _ = env.reset()
    while env.agents:  # the env raises on an action that is not a scalar in its space
        obs, *_ = env.step(policy({a: obs[a] for a in env.agents}))


def test_recurrent_agents_policy_keeps_each_agents_state_until_reset(tmp_path):
    result = train(config=config(**{"policy.recurrent": "gru", "policy.rnn_hidden_size": 8, "ppo.num_minibatches": 1}),
                   run_dir=tmp_path / "run", progress=False)
    assert result.summary["eval_return_mean"] == 28.0
    policy = load_policy(tmp_path / "run")
    assert policy.recurrent
    env = Relay()

    def episode():
        obs, _ = env.reset()
        policy.reset()
        actions = []
        while env.agents:
            step = policy({a: obs[a] for a in env.agents})
            actions.append(step)
            obs, *_ = env.step(step)
        return actions

    first = episode()
    assert [len(a) for a in first] == [3, 3, 2, 2, 1, 1]  # agents leave; each keeps its own row
    assert [{k: int(v) for k, v in a.items()} for a in episode()] == [{k: int(v) for k, v in a.items()} for a in first]


@pytest.mark.parametrize("mask", [False, "obs"])
def test_an_absent_recurrent_agent_keeps_its_state(tmp_path, mask):
    """AgentsPolicy with policy.recurrent = "lstm": an agent missing from a call keeps its recurrent state (and
    its episode start), untouched by the call; the agents present step as they would with it there. Also with
    masks in each agent's Dict observation."""
    result = train(config=config(**{"policy.recurrent": "lstm", "policy.rnn_hidden_size": 8,
                                    "ppo.num_minibatches": 1, "env.kwargs": {"mask": mask}}),
                   run_dir=tmp_path / "run", progress=False)
    assert result.summary["eval_return_mean"] == 28.0
    policy, reference = load_policy(tmp_path / "run"), load_policy(tmp_path / "run")
    rows, reference_rows = policy.policies["runner"], reference.policies["runner"]
    assert rows.recurrent and rows.masked == bool(mask)

    def obs(t: int, agents=(0, 1, 2)) -> dict:
        own = {f"runner_{i}": np.array([t / 10, i / 3, 1.0], dtype=np.float32) for i in agents}
        if not mask:
            return own
        legal = np.array([t % 2 == 0, True, True], dtype=np.int8)
        return {a: {"observation": o, "action_mask": legal} for a, o in own.items()}

    for p in (policy, reference):
        p.reset()
        p(obs(0))
    kept = rows.state[1].clone()
    policy(obs(1, (0, 2)))  # runner_1 is absent
    assert torch.equal(rows.state[1], kept)
    reference(obs(1))  # runner_1 present: rows 0 and 2 step the same
    assert torch.allclose(rows.state[[0, 2]], reference_rows.state[[0, 2]], atol=1e-6)
    assert not torch.equal(reference_rows.state[1], kept)
    # absent from the start of an episode: its first observation starts it from the initial state
    policy.reset()
    policy(obs(0, (0,)))
    assert torch.equal(rows.state[1:], torch.zeros_like(rows.state[1:]))
    policy(obs(1, (0, 1)))
    reference.reset()
    reference(obs(1))
    assert torch.allclose(rows.state[1], reference_rows.state[1], atol=1e-6)


def test_env_id_module_colon_name_makes_the_env_with_that_function():
    """``env.id = "module:name"``: ``name`` of the module makes the env, instead of its parallel_env."""
    env = make_lanes(config(**{"env.id": f"{RELAY}:Mixed"}).env, torch.device("cpu"), policy=config().policy)
    try:
        assert {g: spec.agents for g, spec in env.lanes.items()} == {"runner": ["runner_0", "runner_1"],
                                                                     "scout": ["scout_0"]}
    finally:
        env.close()
    with pytest.raises(ConfigError, match=re.escape(f"module {RELAY!r} has no 'Scout'")) as info:
        make_lanes(config(**{"env.id": f"{RELAY}:Scout"}).env, torch.device("cpu"))
    assert "\n" not in str(info.value)


def test_an_env_that_raises_is_named_by_its_factory(tmp_path):
    class Stalling(Relay):
        def step(self, actions):
            raise RuntimeError("motor stalled")

    def stalling_relay():
        return Stalling()

    with pytest.raises(TrainingError, match=r"^env stalling_relay raised RuntimeError.*: motor stalled"):
        train(config=config(), env=stalling_relay, run_dir=tmp_path / "run", progress=False)


def test_a_misspelt_module_is_named_not_the_extra(tmp_path):
    with pytest.raises(ConfigError, match=re.escape("cannot import 'mpe2.simple_spred_v3'")) as info:
        train(config=config(**{"env.id": "mpe2.simple_spred_v3"}), run_dir=tmp_path / "run", progress=False)
    assert "pip install" not in str(info.value)


@pytest.mark.parametrize(("kind", "shares"), [("relay", None), ("mixed", None), ("relay", 3)])
def test_async_copies_give_the_sync_results_bit_for_bit(tmp_path, kind, shares):
    """env.vectorization_mode = "async" steps the copies in worker processes and this one at once (one share per
    CPU, or env.shares of them): the same metrics and parameters as "sync" (each copy has its own generator),
    with the state critic's states too."""
    overrides = {"env.kwargs": {"kind": kind}, "env.num_envs": 5, "policy.critic": "state",
                 "run.total_timesteps": 120}
    sync = train(config=config(**overrides), run_dir=tmp_path / "sync", progress=False)
    in_shares = {"env.vectorization_mode": "async"} | ({} if shares is None else {"env.shares": shares})
    both = train(config=config(**overrides, **in_shares), run_dir=tmp_path / "async", progress=False)
    columns = ("update", "env_steps", "policy_loss", "value_loss", "entropy", "episodic_return")
    rows = []
    for run in ("sync", "async"):
        with open(tmp_path / run / "metrics.csv") as f:
            rows.append([[r[c] for c in columns] for r in csv.DictReader(f)])
    assert rows[0] == rows[1] and len(rows[0]) == 2
    for a, b in zip(sync.policy.agent.state_dict().values() if kind == "relay" else
                    [p for agent in sync.policy.agent.values() for p in agent.state_dict().values()],
                    both.policy.agent.state_dict().values() if kind == "relay" else
                    [p for agent in both.policy.agent.values() for p in agent.state_dict().values()], strict=True):
        assert torch.equal(a, b)
    assert sync.summary["eval_return_mean"] == both.summary["eval_return_mean"]


def test_a_factory_that_raises_in_a_worker_is_one_line(tmp_path):
    here = os.getpid()

    def factory():
        if os.getpid() != here:  # this process's copies work; a worker's fail
            raise RuntimeError("no licence on this host")
        return Relay()

    with pytest.raises(ConfigError, match="no licence on this host") as info:
        train(config=config(**{"env.vectorization_mode": "async", "env.num_envs": 4}), env=factory,
              run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value)


def test_tune_runs_trials_of_a_two_group_run(tmp_path):
    """ppo-core tune on a multi-agent config: each trial trains both groups and is scored by the team return."""
    space = tmp_path / "space.toml"
    space.write_text('[tune.space]\nppo.learning_rate = { log_uniform = [1e-4, 3e-3] }\n')
    args = ["tune", "--config", "cartpole", "--space", str(space), "--trials", "2", "--jobs", "1", "--seeds", "0",
            "--total-timesteps", "48", "--study-dir", str(tmp_path / "study")]
    for key, value in BASE.items():
        if key != "run.total_timesteps":
            args += ["--set", f"{key}={json.dumps(value)}"]
    args += ["--set", 'env.kwargs={ kind = "mixed" }']
    proc = run_main(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = last_json(proc.stdout)
    assert result["complete"] == 2
    assert result["best_value"] == 60.0  # the exact team return of both groups
