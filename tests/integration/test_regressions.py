"""Regression tests: behaviours that work today, pinned to their exact values through the real code paths.

1. episode statistics under SAME_STEP autoreset (metrics.csv, sync and async, a custom env id);
2. the annealed learning rate across an interrupted and resumed run;
3. the epoch count under ``ppo.target_kl``;
4. ``weights_only`` checkpoint loading: a pickle that would run code is refused, and does not run;
5. MultiDiscrete log-probs and entropies against a float64 hand computation, 0-based stored actions;
6. reward scaling divides by the std of the discounted return and shifts no mean;
7. custom env ids in async workers, trained and evaluated through main.py (with 1);
8. the sign of the entropy bonus in the PPO update.
"""

import csv
import json
import signal
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest
import torch

import core
from shell.api import resume
from shell.checkpoint import load_checkpoint
from shell.config import PolicyConfig, config_from_dict
from shell.distributed import Dist
from shell.errors import ConfigError
from shell.normalization import RewardScaler
from shell.policies import ActorCritic
from shell.ppo import PPO
from shell.runner import Trainer
from shell.seeding import eval_seeds, per_copy, train_seeds
from shell.stop import StopRequest
from shell.storage import RolloutStorage, Transition

from .custom_envs import COUNTING_LENGTHS, CountingEnv

CUSTOM = "tests.integration.custom_envs"


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def read_rows(run: Path) -> list[dict[str, str]]:
    with open(run / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def small_config(env: dict | None = None, ppo: dict | None = None, run: dict | None = None):
    return config_from_dict({"env": {"num_envs": 2, **(env or {})},
                             "ppo": {"num_steps": 16, "num_minibatches": 2, "update_epochs": 2, **(ppo or {})},
                             "run": {"eval_episodes": 0, "device": "cpu", **(run or {})}})


# ----------------------------------------------------------------------------- 1 + 7: episode statistics
def counting_eval(seed: int, episodes: int) -> tuple[float, int]:
    """(mean return, truncated count) of an evaluation of ``episodes`` CountingEnv episodes: episode i in the
    phase of its seed (phase 2, the 7-step one, is cut by the time limit)."""
    phases = [s % 3 for s in per_copy(eval_seeds(seed, "spawn", episodes), episodes)]
    lengths = [COUNTING_LENGTHS[p] for p in phases]
    return sum(n * (n + 1) / 2 for n in lengths) / episodes, phases.count(2)


def expected_episode_means(seed: int, num_envs: int, num_steps: int, updates: int) -> list[tuple[float, float]]:
    """(mean return, mean length) of the episodes that end in each update of a CountingEnv run, by hand.

    Sub-env i starts at phase ``s_i % 3`` of its reset seed s_i (shell/seeding.py) and runs on across rollouts
    (no reset between updates).
    """
    phase = [s % 3 for s in per_copy(train_seeds(seed, "spawn", num_envs), num_envs)]
    t_in_episode = [0] * num_envs
    lengths: list[list[int]] = [[] for _ in range(updates)]
    for t in range(updates * num_steps):
        for i in range(num_envs):
            t_in_episode[i] += 1
            if t_in_episode[i] == COUNTING_LENGTHS[phase[i]]:
                lengths[t // num_steps].append(t_in_episode[i])
                t_in_episode[i], phase[i] = 0, (phase[i] + 1) % 3
    out = []
    for ended in lengths:
        assert ended, "every update of the test ends some episode"
        out.append((sum(n * (n + 1) / 2 for n in ended) / len(ended), sum(ended) / len(ended)))
    return out


@pytest.mark.parametrize("mode", ["sync", "async", "threads"])
def test_episode_statistics_are_the_true_episode_sums(main, tmp_path, mode):
    """Terminations after 3 and 5 steps, time-limit truncations after 7; the k-th step pays k.

    With a dummy step counted (NEXT_STEP), or the first step of each episode dropped, the lengths
    and returns differ. Under "async" the custom id is imported in the workers (item 7)."""
    run = tmp_path / "run"
    num_envs, num_steps, updates, seed = 3, 16, 4, 0
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:Counting-v0",
                "--set", f"env.vectorization_mode='{mode}'", "--set", f"env.num_envs={num_envs}",
                "--set", f"ppo.num_steps={num_steps}", "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=1",
                "--set", "run.eval_episodes=2", "--seed", str(seed),
                "--total-timesteps", str(updates * num_envs * num_steps), "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert f'vectorization_mode = "{mode}"' in (run / "config.toml").read_text()
    rows = read_rows(run)
    assert [int(r["update"]) for r in rows] == list(range(1, updates + 1))
    expected = expected_episode_means(seed, num_envs, num_steps, updates)
    assert [float(r["episodic_return"]) for r in rows] == pytest.approx([e[0] for e in expected], rel=1e-6)
    assert [float(r["episodic_length"]) for r in rows] == pytest.approx([e[1] for e in expected], rel=1e-6)
    # cartpole.toml's reward_scale = 0.1 scales the rewards PPO sees, never the logged (raw) returns
    # the evaluation: episode i of its seed's phase (shell/seeding.py): lengths 3, 5 (terminated) or 7 (cut)
    summary = json.loads(last_line(proc.stdout))
    mean, truncated = counting_eval(seed, 2)
    assert summary["eval_episodes"] == 2 and summary["eval_truncated_episodes"] == truncated
    assert summary["eval_return_mean"] == pytest.approx(mean)
    if mode == "async":
        result = main("eval", str(run), "--episodes", "3")
        assert result.returncode == 0, result.stderr[-2000:]
        out = json.loads(last_line(result.stdout))
        mean, truncated = counting_eval(seed, 3)
        assert out["eval_episodes"] == 3 and out["eval_return_mean"] == pytest.approx(mean)
        assert out["eval_truncated_episodes"] == truncated


def test_counting_env_matches_its_description():
    """The hand model above is only as good as the env: check the env against it directly."""
    env = gym.make(f"{CUSTOM}:Counting-v0")
    env.reset(seed=4)  # phase 1
    for phase in (1, 2, 0, 1):
        rewards, terminated, truncated = [], False, False
        while not (terminated or truncated):
            _, r, terminated, truncated, _ = env.step(0)
            rewards.append(r)
        assert rewards == [float(k) for k in range(1, COUNTING_LENGTHS[phase] + 1)]
        assert (terminated, truncated) == ((True, False) if phase < 2 else (False, True))
        env.reset()
    assert isinstance(env.unwrapped, CountingEnv)


# ----------------------------------------------------------------------------- 2: learning rate across a resume
class StopAfterUpdate(StopRequest):
    """A stop request that SIGTERMs the run once its trainer has finished ``update`` updates."""

    def __init__(self, update: int):
        super().__init__()
        self.update, self.trainer = update, None

    def check(self) -> None:
        if self.trainer is not None and self.trainer.update >= self.update:
            self.request(signal.SIGTERM)
        super().check()


def test_annealed_learning_rate_is_the_same_after_an_interruption_and_resume(tmp_path, monkeypatch):
    lr0, updates = 1e-3, 6
    cfg = small_config(env={"id": "CartPole-v1"}, ppo={"anneal_lr": True, "learning_rate": lr0},
                       run={"total_timesteps": updates * 32, "checkpoint_every": 0})
    used: list[float] = []  # the optimizer's rate at each PPO update, not just the logged one
    update = PPO.update

    def spy(self, *args, **kwargs):
        used.append(self.optimizer.lr)
        return update(self, *args, **kwargs)

    monkeypatch.setattr(PPO, "update", spy)

    straight = tmp_path / "straight"
    Trainer(cfg, straight).train()
    used_straight, used[:] = list(used), []

    interrupted = tmp_path / "interrupted"
    stop = StopAfterUpdate(3)
    trainer = Trainer(cfg, interrupted, stop=stop)
    stop.trainer = trainer
    summary = trainer.train()
    assert summary["interrupted"] is True and summary["signal"] == "SIGTERM" and summary["updates"] == 3
    assert load_checkpoint(summary["checkpoint"])["update"] == 3
    summary = resume(interrupted).summary  # the saved total: 6 updates
    assert summary["interrupted"] is False and summary["updates"] == updates

    schedule = [core.linear_schedule(lr0, 0.0, u, updates) for u in range(updates)]
    assert schedule == pytest.approx([lr0 * (1 - u / updates) for u in range(updates)], rel=1e-12)
    for run in (straight, interrupted):
        rows = read_rows(run)
        assert [int(r["update"]) for r in rows] == list(range(1, updates + 1))
        assert [float(r["learning_rate"]) for r in rows] == schedule, run.name
    assert used_straight == schedule
    assert used == schedule  # 3 updates before the SIGTERM, 3 after the resume


# ----------------------------------------------------------------------------- 3: target_kl
@pytest.mark.parametrize(("target_kl", "epochs"), [(1e-6, 1), (1e6, 4), (None, 4)])
def test_target_kl_stops_the_epochs(tmp_path, target_kl, epochs):
    ppo = {"update_epochs": 4, "learning_rate": 1e-2, "target_kl": target_kl}
    if target_kl is None:
        del ppo["target_kl"]
    cfg = small_config(env={"id": "CartPole-v1"}, ppo=ppo, run={"total_timesteps": 3 * 32})
    Trainer(cfg, tmp_path).train()
    rows = read_rows(tmp_path)
    assert len(rows) == 3
    assert [float(r["epochs"]) for r in rows] == [epochs] * 3
    if target_kl == 1e-6:  # the first epoch's mean KL (the logged one) is above the target: it stopped there
        assert all(float(r["approx_kl"]) > target_kl for r in rows)


# ----------------------------------------------------------------------------- 4: weights_only
class RunsCode:
    """Unpickling this runs code: it writes ``path``."""

    def __init__(self, path: Path):
        self.path = str(path)

    def __reduce__(self):
        return exec, (f"open({self.path!r}, 'w').write('pwned')",)


def test_checkpoints_load_weights_only_and_code_in_a_pickle_is_refused(main, tmp_path):
    cfg = small_config(env={"id": "Pendulum-v1"}, run={"total_timesteps": 32})
    trainer = Trainer(cfg, tmp_path / "good")
    good = trainer.save()
    trainer.env.close()
    state = torch.load(good, weights_only=True)  # everything a real checkpoint holds is allow-listed
    assert state["update"] == 0 and "model" in state and "optimizer" in state

    marker = tmp_path / "pwned"
    run = tmp_path / "evil"
    evil = run / "checkpoints" / "ckpt_000000000064.pt"
    evil.parent.mkdir(parents=True)
    torch.save({**state, "env_steps": 64, "config": RunsCode(marker)}, evil)

    with pytest.raises(ConfigError, match=r"ckpt_000000000064\.pt"):
        load_checkpoint(evil)
    assert not marker.exists()
    for args in (["eval", str(evil)], ["eval", str(run)], ["--resume", str(run)]):
        proc = main(*args)
        assert proc.returncode == 2, (args, proc.stderr[-2000:])
        assert "Traceback" not in proc.stderr and str(evil) in last_line(proc.stderr), args
        assert len(proc.stderr.strip().splitlines()) == 1, args
        assert not marker.exists(), args
    # the payload is real: a plain (unsafe) load runs it
    torch.load(evil, weights_only=False)
    assert marker.read_text() == "pwned"


# ----------------------------------------------------------------------------- 5: MultiDiscrete
def test_multidiscrete_log_prob_and_entropy_against_float64():
    nvec, start = [3, 2, 4], [-1, 5, 10]
    space = gym.spaces.MultiDiscrete(nvec, start=start)
    torch.manual_seed(0)
    agent = ActorCritic(5, space, PolicyConfig())
    torch.nn.init.normal_(agent.actor.net[-1].weight, std=2.0)  # far from uniform: entropies differ per row
    obs = torch.randn(64, 5)
    out = agent.get_action(obs, generator=torch.Generator().manual_seed(1))
    raw = out.raw_action
    assert raw.dtype == torch.long and raw.shape == (64, 3)
    assert torch.equal(out.action, raw + torch.tensor(start))
    for k, n in enumerate(nvec):
        assert raw[:, k].min() >= 0 and raw[:, k].max() <= n - 1

    with torch.no_grad():
        logits = agent.actor.net(obs).double().split(nvec, dim=-1)
    log_p = [torch.log_softmax(lg, -1) for lg in logits]
    expected_log_prob = sum(lp.gather(1, raw[:, k:k + 1]).squeeze(1) for k, lp in enumerate(log_p))
    expected_entropy = sum(-(lp.exp() * lp).sum(-1) for lp in log_p)
    # a softmax over all 9 logits, or the components' logits split in another order, is far from these
    joint = torch.log_softmax(torch.cat(logits, -1), -1)
    assert not torch.allclose(expected_entropy, -(joint.exp() * joint).sum(-1), atol=1e-2)
    assert expected_entropy.std() > 0.1

    log_prob, entropy, _ = agent.evaluate(obs, raw)
    assert log_prob.shape == entropy.shape == (64,)
    torch.testing.assert_close(out.log_prob.double(), expected_log_prob, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(log_prob.double(), expected_log_prob, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(entropy.double(), expected_entropy, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(agent.actor.log_prob(obs, raw).double(), expected_log_prob, atol=1e-5, rtol=1e-5)


def test_multidiscrete_rollout_stores_0_based_indices(tmp_path):
    """The env (which raises on any action outside MultiDiscrete([3, 2, 4], start=[-1, 5, 10])) gets
    index + start; the storage keeps the 0-based index and its log-prob."""
    cfg = small_config(env={"id": f"{CUSTOM}:MultiDiscrete324-v0"}, ppo={"num_steps": 64})
    trainer = Trainer(cfg, tmp_path)
    trainer.collect(trainer.env.reset(seed=0))
    raw = trainer.lanes.only.storage.raw_actions.flatten(0, 1)
    assert raw.dtype == torch.long and raw.shape == (128, 3)
    assert raw.min(0).values.tolist() == [0, 0, 0] and raw.max(0).values.tolist() == [2, 1, 3]
    with torch.no_grad():
        logits = trainer.agent.actor.net(trainer.lanes.only.storage.obs.flatten(0, 1)).double().split([3, 2, 4], dim=-1)
    expected = sum(torch.log_softmax(lg, -1).gather(1, raw[:, k:k + 1]).squeeze(1) for k, lg in enumerate(logits))
    torch.testing.assert_close(trainer.lanes.only.storage.log_probs.flatten().double(), expected, atol=1e-5, rtol=1e-5)
    trainer.env.close()


# ----------------------------------------------------------------------------- 6: reward scaling
def scaled_by_hand(rewards: np.ndarray, dones: np.ndarray, gamma: float, clip: float = 10.0,
                   eps: float = 1e-8) -> np.ndarray:
    """``clip(r_t / sqrt(Var[R_0..R_t] + eps))`` with ``R_t = gamma R_{t-1} + r_t`` per env, reset after a done."""
    running = np.zeros(rewards.shape[1])
    seen: list[float] = []
    out = np.zeros_like(rewards)
    for t in range(len(rewards)):
        running = gamma * running + rewards[t]
        seen.extend(running)
        out[t] = np.clip(rewards[t] / np.sqrt(np.var(seen) + eps), -clip, clip)
        running = np.where(dones[t], 0.0, running)
    return out


def test_reward_scaler_divides_by_the_return_std_without_a_mean_shift():
    gamma = 0.9
    rewards = np.array([[5.0, 0.0], [-2.0, 3.0], [0.0, 7.0], [4.0, -1.0], [6.0, 0.0], [1.0, 2.0], [0.0, -8.0]])
    dones = np.array([[0, 0], [0, 1], [1, 0], [0, 0], [0, 1], [0, 0], [0, 0]], dtype=bool)
    scaler = RewardScaler(gamma, enabled=True)
    got = []
    for t in range(len(rewards)):
        got.append(scaler.scale(torch.tensor(rewards[t], dtype=torch.float32), torch.tensor(dones[t]),
                                torch.ones(2, dtype=torch.bool)))
        if t == 3:
            scaler.commit(Dist())  # a rollout boundary in the middle: the statistics carry on
    got = torch.stack(got).double().numpy()
    np.testing.assert_allclose(got, scaled_by_hand(rewards, dones, gamma), rtol=1e-6)
    assert np.array_equal(np.sign(got), np.sign(rewards))  # signs kept, zero rewards stay exactly 0
    assert np.all(got[rewards == 0] == 0.0)
    # core.scale_rewards is a plain division (then the clip): no mean is subtracted
    var = torch.tensor(4.0, dtype=torch.float64)
    r = torch.tensor([3.0, 0.0, -1.0, 0.5])
    torch.testing.assert_close(core.scale_rewards(r, var, eps=0.0), r / 2)


def test_constant_positive_rewards_stay_positive_in_the_rollout(tmp_path):
    """NeverEnding-v0 pays 1 every step: the stored rewards are 1 / std(R) (clipped), all positive,
    which a mean shift would turn into ~0 or negative values."""
    gamma = 0.9
    cfg = small_config(env={"id": f"{CUSTOM}:NeverEnding-v0", "normalize_reward": True}, ppo={"gamma": gamma})
    trainer = Trainer(cfg, tmp_path)
    trainer.collect(trainer.env.reset(seed=0))
    stored = trainer.lanes.only.storage.rewards.double().numpy()
    expected = scaled_by_hand(np.ones((16, 2)), np.zeros((16, 2), dtype=bool), gamma)
    np.testing.assert_allclose(stored, expected, rtol=1e-6)
    assert np.all(stored > 0) and stored[0, 0] == 10.0  # var of two equal returns is 0: clipped
    trainer.env.close()


# ----------------------------------------------------------------------------- 8: entropy bonus sign
def zero_advantage_update(ent_coef: float) -> tuple[float, float, bool]:
    """One PPO update of a peaked Discrete(4) policy on a rollout whose advantages are all 0 (and
    returns equal the values): only the entropy term has a gradient. Returns the mean entropy
    before and after, and whether the actor's parameters are unchanged."""
    torch.manual_seed(0)
    agent = ActorCritic(4, gym.spaces.Discrete(4), PolicyConfig())
    torch.nn.init.normal_(agent.actor.net[-1].weight, std=1.0)  # far from uniform: the entropy can rise
    cfg = config_from_dict({"ppo": {"num_steps": 32, "num_minibatches": 2, "update_epochs": 2,
                                    "learning_rate": 1e-3}}).ppo
    ppo = PPO(agent, cfg, ent_coef, torch.Generator().manual_seed(0))
    storage = RolloutStorage(32, 2, 4, (), torch.long, torch.device("cpu"))
    gen = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for _ in range(32):
            obs = torch.randn(2, 4, generator=gen)
            _, raw = agent.sample_action(obs, gen)
            storage.add(Transition(obs, raw, torch.zeros(2), torch.zeros(2, dtype=torch.bool),
                                   torch.ones(2, dtype=torch.bool)))
        flat_obs = storage.obs.flatten(0, 1)
        storage.set_log_probs_and_values(*agent.log_prob_and_value(flat_obs, storage.raw_actions.flatten(0, 1)))
        storage.advantages.zero_()
        storage.returns.copy_(storage.values)

    def entropy() -> float:
        with torch.no_grad():
            return float(agent.actor.distributions(flat_obs)[0].entropy().mean())

    before_params = [p.clone() for p in agent.actor.parameters()]
    before = entropy()
    metrics = ppo.update(storage)
    assert float(metrics["epochs"]) == 2
    unchanged = all(torch.equal(a, b) for a, b in zip(before_params, agent.actor.parameters(), strict=True))
    return before, entropy(), unchanged


def test_a_positive_entropy_coefficient_raises_the_entropy():
    before, after, unchanged = zero_advantage_update(0.1)
    assert before < 0.5 * np.log(4)  # peaked, so there is room to rise
    assert after > before + 0.05 and not unchanged
    # the control: the same update with the term's sign flipped lowers it (what a sign bug would do)
    flipped_before, flipped_after, _ = zero_advantage_update(-0.1)
    assert flipped_before == before and flipped_after < before - 0.05


def test_a_zero_entropy_coefficient_leaves_the_policy_alone_on_zero_advantages():
    before, after, unchanged = zero_advantage_update(0.0)
    assert unchanged and after == before
