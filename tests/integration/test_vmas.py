"""VMAS scenarios (env.backend = "vmas"): agents as rows on the device, VMAS's own results row by row, worlds that
end at different steps, the time-limit bootstrap, streams of their own, and a short balance run through main with
eval, load_policy, export per lane and resume; bad input and the video refusal in one line."""

from __future__ import annotations

import csv
import json
import os
import shutil

import pytest
import torch

vmas = pytest.importorskip("vmas")  # the vmas extra (in dev)

from shell.api import train  # noqa: E402
from shell.config import load_config  # noqa: E402
from shell.envs import Rows, make_lanes  # noqa: E402
from shell.errors import ConfigError  # noqa: E402
from shell.inference import load_policy  # noqa: E402
from shell.observations import ACTOR_KEY, CRITIC_KEY  # noqa: E402

from .conftest import ROOT, run_main  # noqa: E402
from .vmas_scenarios import Countdown  # noqa: E402

CPU = torch.device("cpu")
BALANCE = {"env.backend": "vmas", "env.id": "balance", "env.kwargs": {"n_agents": 3}, "env.num_envs": 4,
           "env.max_episode_steps": 10, "ppo.num_steps": 10, "ppo.num_minibatches": 2, "ppo.update_epochs": 2,
           "policy.hidden_sizes": [16], "run.eval_episodes": 3, "run.total_timesteps": 80, "run.loggers": []}


def config(**overrides):
    """BALANCE with ``overrides``; a key set to None is left out (its default)."""
    merged = {**BALANCE, **overrides}
    return load_config(None, {k: v for k, v in merged.items() if v is not None})


def cli_sets() -> list[str]:
    """BALANCE as ``--set`` flags of main (but its step budget and loggers)."""
    args = []
    for key, value in BALANCE.items():
        if key not in ("run.total_timesteps", "run.loggers"):
            args += ["--set", f"{key}={json.dumps(value) if not isinstance(value, dict) else '{ n_agents = 3 }'}"]
    return args


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def test_rows_are_vmas_agents_world_major_and_match_vmas_itself():
    """A group of 3 agents in 4 worlds is 12 rows, row i*3 + j agent j of world i; observations, rewards and the
    effect of each row's action are VMAS's own for the same seed (VMAS's reset(seed) seeds as the backend does)."""
    cfg = config()
    env = make_lanes(cfg.env, CPU, policy=cfg.policy)
    raw = vmas.make_env("balance", num_envs=4, device="cpu", n_agents=3)
    try:
        (group, spec), = env.lanes.items()
        assert (group, spec.num_envs, spec.rows_per_copy, env.copies) == ("agent", 12, 3, 4)
        assert spec.agents == ["agent_0", "agent_1", "agent_2"] and env.max_episode_steps == 10
        rows = env.reset(seed=7)[group]
        expected = raw.reset(seed=7)
        assert torch.equal(rows.obs, torch.stack(expected, dim=1).reshape(12, -1)) and rows.valid.all()
        gen = torch.Generator().manual_seed(0)
        for _ in range(3):
            action = torch.rand(12, 2, generator=gen) * 2 - 1
            step = env.step({group: action})[group]
            obs, rewards, _, _ = raw.step(list(action.reshape(4, 3, 2).unbind(1)))
            assert torch.equal(step.obs, torch.stack(obs, dim=1).reshape(12, -1))
            assert torch.equal(step.reward, torch.stack(rewards, dim=1).reshape(12))
            assert step.final_obs is None and not step.ended.any()
    finally:
        env.close()


def test_the_runs_other_streams_are_untouched_and_each_env_has_its_own():
    """VMAS keeps one random state for the process; each env here swaps its own in: the global torch generator is
    untouched, and stepping another env in between changes nothing."""
    cfg = config()

    def run(other: bool) -> list[torch.Tensor]:
        env = make_lanes(cfg.env, CPU, policy=cfg.policy)
        second = make_lanes(cfg.env, CPU, policy=cfg.policy) if other else None
        out = [env.reset(seed=1)["agent"].obs]
        for _ in range(12):  # past the 10-step limit: every world resets, drawing new starts
            if second is not None:
                second.reset(seed=99)
            out.append(env.step({"agent": torch.zeros(12, 2)})["agent"].obs)
        return out

    torch.manual_seed(123)
    before = torch.get_rng_state()
    alone = run(False)
    assert torch.equal(torch.get_rng_state(), before)
    beside = run(True)
    assert all(torch.equal(a, b) for a, b in zip(alone, beside, strict=True))


def test_worlds_that_end_at_different_steps_reset_alone_and_report_the_team_return():
    """Countdown worlds end after 2 or 3 steps in turn: only those reset (their reset observation in obs, their last
    in nothing else: a termination needs no bootstrap), and each ended world reports its group's return once."""
    cfg = config(**{"env.max_episode_steps": None})
    env = make_lanes(cfg.env, CPU, source=lambda: Countdown((2, 3)), policy=cfg.policy)
    try:
        rows = env.reset(seed=0)["runner"]
        assert rows.obs.shape == (8, 4) and rows.obs[:, 2].eq(0).all()
        ends = {1: [True, False, True, False], 2: [False, True, False, True], 3: [True, False, True, False]}
        for t in range(4):
            step = env.step({"runner": torch.zeros(8, 2)})["runner"]
            assert step.ended.tolist() == ends.get(t, [False] * 4), t
            assert step.terminated.tolist() == [e for e in step.ended.tolist() for _ in range(2)]
            assert not step.truncated.any() and step.final_obs is None
            # the step count each row observes: 0 in a world that just reset, else the world's steps
            counts = step.obs[:, 2].reshape(4, 2)[:, 0].tolist()
            length = [2, 3, 2, 3]
            since = [(t + 1) % n for n in length]
            assert counts == [float(s) for s in since], (t, counts)
            done = step.episode_done.reshape(4, 2)
            assert done[:, 0].tolist() == step.ended.tolist() and not done[:, 1].any()
            returns = step.episode_return.reshape(4, 2)[:, 0]
            assert returns[step.ended].tolist() == [(1 + 2) * length[i] for i in range(4) if step.ended[i]]
            assert step.episode_length.reshape(4, 2)[:, 0][step.ended].tolist() == \
                [length[i] for i in range(4) if step.ended[i]]
    finally:
        env.close()


def test_a_time_limit_truncates_with_each_agents_final_observation():
    """env.max_episode_steps = 2 on worlds that would run 5 steps: the second step truncates every row (not
    terminated), final_obs holds the last observations (step count 2, in the centralised critic's part too), obs
    the reset ones (0)."""
    cfg = config(**{"env.max_episode_steps": 2, "policy.critic": "concat", "policy.agent_id": True})
    env = make_lanes(cfg.env, CPU, source=lambda: Countdown((5,)), policy=cfg.policy)
    try:
        env.reset(seed=0)
        step = env.step({"runner": torch.zeros(8, 2)})["runner"]
        assert not step.truncated.any() and step.final_obs is None
        step = env.step({"runner": torch.zeros(8, 2)})["runner"]
        assert step.truncated.all() and not step.terminated.any() and step.ended.all()
        actor, critic = step.final_obs[ACTOR_KEY], step.final_obs[CRITIC_KEY]
        assert actor.shape == (8, 4 + 2) and critic.shape == (8, 2 * 4 + 2)
        assert actor[:, 2].eq(2).all() and step.obs[ACTOR_KEY][:, 2].eq(0).all()
        assert critic[:, 2].eq(2).all() and critic[:, 6].eq(2).all()  # both agents' step counts
        assert torch.equal(actor[:, 4:], torch.eye(2).repeat(4, 1))  # each row's one-hot index
        assert torch.equal(critic[:, :8], actor[:, :4].reshape(4, 8).repeat_interleave(2, dim=0))
    finally:
        env.close()


def test_truncation_bootstraps_in_training(tmp_path):
    """A trained run's truncated steps store reward + gamma * V(final_obs) (DESIGN.md, "Truncation"): with a time
    limit of 3 steps on Countdown worlds (which would run 5), steps 2 and 5 of the rollout are truncations."""
    from shell.runner import Trainer

    cfg = config(**{"env.max_episode_steps": 3, "env.num_envs": 2, "ppo.num_steps": 6})
    trainer = Trainer(cfg, tmp_path / "run", progress=False, env_source=lambda: Countdown((5,)))
    finals = []
    step = trainer.env.step

    def recording(actions):
        results = step(actions)
        finals.append(results["runner"].final_obs)
        return results

    trainer.env.step = recording
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        trainer.collect(rows)
        lane = trainer.lanes.only
        stored, dones = lane.storage.rewards, lane.storage.dones
        assert dones[[2, 5]].all() and not dones[[0, 1, 3, 4]].any()
        env_reward = torch.tensor([1.0, 2.0]).repeat(2)
        assert torch.equal(stored[[0, 1, 3, 4]], env_reward.expand(4, 4))
        assert [f is None for f in finals] == [True, True, False, True, True, False]
        with torch.no_grad():
            for t in (2, 5):
                value = lane.agent.rollout_value(lane.agent.obs_normalizer.normalize(finals[t]), None)
                torch.testing.assert_close(stored[t], env_reward + cfg.ppo.gamma * value)
    finally:
        trainer.env.close()


def test_balance_trains_evaluates_loads_exports_and_resumes(tmp_path):
    """A short balance run through main; eval; load_policy acts on VMAS's own observations; export per lane
    matches the live policy; a resume continues the metrics."""
    run = tmp_path / "run"
    args = ["--config", "vmas-balance", "--run-dir", str(run), "--total-timesteps", "80"]
    args += cli_sets()
    proc = run_main(*args)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["env_steps"] == 80 and summary["eval_episodes"] == 3
    assert summary["eval_return_mean"] == pytest.approx(3 * summary["eval_return_per_agent"])
    assert summary["eval_max_episode_steps"] == 10
    versions = json.loads((run / "versions.json").read_text())
    assert versions.get("vmas")

    proc = run_main("eval", str(run), "--episodes", "2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["eval_episodes"] == 2

    policy = load_policy(run)
    raw = vmas.make_env("balance", num_envs=1, device="cpu", n_agents=3)
    obs = raw.reset(seed=0)
    actions = policy({agent.name: o[0] for agent, o in zip(raw.agents, obs, strict=True)})
    assert sorted(actions) == ["agent_0", "agent_1", "agent_2"]
    assert all(a.shape == (2,) and abs(a).max() <= 1.0 for a in actions.values())
    raw.step([torch.as_tensor(actions[a.name])[None] for a in raw.agents])

    proc = run_main("export", str(run), "--format", "pt2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    export = last_json(proc.stdout)  # one group: one file, as a single-agent run's
    assert export["checked_max_abs_diff"] == 0.0 and export["checked_observations"] > 0

    proc = run_main("--resume", str(run), "--total-timesteps", "120")
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(proc.stdout)["env_steps"] == 120
    with open(run / "metrics.csv") as f:
        assert [int(r["update"]) for r in csv.DictReader(f)] == [1, 2, 3]


def test_two_groups_train_with_a_policy_each(tmp_path):
    """Runners and a scout (other observation sizes) form two lanes; the team return sums both groups."""
    result = train(config=config(**{"env.max_episode_steps": None, "run.total_timesteps": 40}),
                   env=lambda: Countdown((2,), scouts=1), run_dir=tmp_path / "run", progress=False)
    assert set(result.policy.agent) == {"runner", "scout"}
    # every 2-step episode: runners 1 + 2 per step, the scout 3
    assert result.summary["eval_return_mean"] == 2 * (1 + 2 + 3)
    assert result.summary["eval_return_per_group"] == {"runner": 6.0, "scout": 6.0}
    proc = run_main("export", str(tmp_path / "run"), "--format", "pt2")  # a file per lane, each as the live policy
    assert proc.returncode == 0, proc.stderr[-2000:]
    exports = last_json(proc.stdout)["exports"]
    assert set(exports) == {"runner", "scout"} and all(e["checked_max_abs_diff"] == 0.0 for e in exports.values())


@pytest.mark.parametrize(("overrides", "message"), [
    ({"env.id": "no_such_scenario"}, "env.backend = 'vmas' has no scenario 'no_such_scenario'"),
    ({"env.kwargs": {"n_agents": 3, "n_agentz": 2}}, "{'n_agentz': 2} in env.kwargs are not arguments of the scen"),
    ({"env.kwargs": {"max_steps": 50}}, "env.kwargs.max_steps is set by env.backend = 'vmas' itself; use env.max_"),
    ({"policy.critic": "state"}, "VMAS scenarios have none"),
    ({"env.vectorization_mode": "async"}, "does not apply to env.backend = 'vmas'"),
    ({"env.wrappers": [{"class": "gymnasium.wrappers:ClipReward"}]}, "env.wrappers need env.backend"),
])
def test_bad_vmas_input_is_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError) as info:
        train(config=config(**overrides), run_dir=tmp_path / "run", progress=False)
    assert message in str(info.value) and "\n" not in str(info.value)
    assert not (tmp_path / "run").exists()


def test_an_unknown_scenario_exits_2_in_one_line(tmp_path):
    proc = run_main("--config", "vmas-balance", "--set", "env.id=balanse", "--run-dir", str(tmp_path / "run"))
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines()[-1].startswith("error: env.backend = 'vmas' has no scenario 'balanse'")


def test_eval_video_records_under_a_display_or_is_refused_in_one_line(tmp_path):
    """VMAS renders through pyglet: with a display (or Xvfb to start one) eval --video records; without, it is
    refused with exit 2 and one line."""
    run = tmp_path / "run"
    train(config=config(**{"run.total_timesteps": 40, "ppo.num_steps": 10}), run_dir=run, progress=False)
    proc = run_main("eval", str(run), "--episodes", "1", "--video")
    if os.environ.get("DISPLAY") or shutil.which("Xvfb"):
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert len(last_json(proc.stdout)["videos"]) == 1
    else:
        assert proc.returncode == 2, proc.stderr[-2000:]
        last = proc.stderr.strip().splitlines()[-1]
        assert "needs an X display" in last and "Xvfb is not installed" in last


def test_rows_of_a_step_are_rows_the_trainer_reads():
    """The step records carry the LaneEnv contract's fields for every group (valid rows, no masks)."""
    cfg = config()
    env = make_lanes(cfg.env, CPU, policy=cfg.policy)
    try:
        assert env.mask_sources() == {"agent": None}
        rows = env.reset(seed=0)
        step = env.step({"agent": torch.zeros(12, 2)})
        assert isinstance(rows["agent"], Rows) and step["agent"].valid.all() and step["agent"].action_mask is None
    finally:
        env.close()


def test_torchrun_trains_vmas_worlds_on_two_ranks(tmp_path):
    """Two ranks, each with its own batch of worlds seeded from its own stream: one summary, world_size 2, and the
    global step count (2 ranks x 4 worlds x 10 steps per update, two updates)."""
    from .test_distributed import torchrun

    args = ["--config", "vmas-balance", "--run-dir", str(tmp_path / "run"), "--total-timesteps", "160"]
    args += cli_sets()
    proc = torchrun(str(ROOT / "main.py"), *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summaries = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(summaries) == 1 and summaries[0]["world_size"] == 2 and summaries[0]["env_steps"] == 160
    with open(tmp_path / "run" / "metrics.csv") as f:
        assert [int(r["env_steps"]) for r in csv.DictReader(f)] == [80, 160]
