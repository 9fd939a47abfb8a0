"""Invalid-action masks end to end: the three conventions through main.py on envs that raise on an illegal
action, MultiDiscrete and MultiBinary masks, Dict observations with a mask key, bad masks, the no-legal-action
error, bit-identity of an all-true mask, load_policy, export parity, recurrent policies, resume, eval, video
and torchrun."""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from gymnasium import spaces

from shell.api import train
from shell.config import PolicyConfig, PPOConfig
from shell.export import export_policy, load_exported, observation_inputs
from shell.inference import load_agent, load_policy
from shell.policies import ActorCritic
from shell.ppo import PPO

from .conftest import ROOT
from .mask_envs import CueChoiceEnv, MaskedPickEnv

PICK = "tests.integration.mask_envs:MaskedPick-v0"
CUE = "tests.integration.mask_envs:CueChoice-v0"
FAST = ["--set", "env.num_envs=4", "--set", "ppo.num_steps=64", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=4", "--set", "run.eval_episodes=4", "--set", "policy.hidden_sizes=[32]"]


def last_json(text: str) -> dict:
    return json.loads([line for line in text.splitlines() if line.startswith("{")][-1])


def last_line(text: str) -> str:
    return text.strip().splitlines()[-1]


def pick(main, tmp_path: Path, convention: str, space: str = "discrete", *extra: str, steps: int = 2048,
         setting: str | None = None, **kwargs):
    env_kwargs = {"convention": convention, "space": space, **kwargs}
    table = "{" + ", ".join(f"{k} = {json.dumps(v)}" for k, v in env_kwargs.items()) + "}"
    args = ["--config", "cartpole", "--set", f'env.id="{PICK}"', "--set", f"env.kwargs={table}",
            "--total-timesteps", str(steps), "--run-dir", str(tmp_path / "run"), *FAST, *extra]
    if setting is not None:
        args += ["--set", f"env.action_mask={setting}"]
    return main(*args)


# uniform random legal actions score 16/3, 8 and 12 (half the bits are forced 0, the free ones are a coin flip)
@pytest.mark.parametrize("convention,space,bar", [("info", "discrete", 13.0), ("obs", "discrete", 13.0),
                                                  ("method", "discrete", 13.0), ("info", "multidiscrete", 13.0),
                                                  ("method", "multibinary", 13.5)])
def test_each_convention_trains_through_main_without_one_illegal_action(main, tmp_path, convention, space, bar):
    """The env raises on an illegal action: exit 0 means the library never sent one, in training or eval;
    and the masked policy learns the task (16 steps, reward 1 per right pick)."""
    extra = []
    if space == "multibinary":
        extra = ["--set", "policy.hidden_sizes=[64, 64]", "--set", "ppo.learning_rate=1e-2"]
    proc = pick(main, tmp_path, convention, space, *extra, steps=4096)
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["eval_return_mean"] >= bar, summary
    agent, _, state = load_agent(tmp_path / "run")
    assert state["action_mask"] == convention  # "auto" found it
    if convention == "obs":  # the mask key is read as the mask, never fed to the encoder
        assert "action_mask" not in agent.observation_space.spaces
        assert set(agent.layout.parts) == {"target"}


def test_explicit_convention_agrees_and_a_convention_that_finds_no_mask_is_exit_2(main, tmp_path):
    ok = pick(main, tmp_path, "info", "discrete", steps=256, setting='"info"')
    assert ok.returncode == 0, ok.stderr[-2000:]
    assert "action masks: info['action_mask'] (env.action_mask = 'info')" in ok.stderr.splitlines()  # at start-up
    for i, setting in enumerate(('"method"', '"obs"')):  # the env gives info masks only
        proc = main("--config", "cartpole", "--set", f'env.id="{PICK}"', "--set", f"env.action_mask={setting}",
                    "--total-timesteps", "256", "--run-dir", str(tmp_path / f"bad{i}"), *FAST)
        assert proc.returncode == 2, proc.stderr[-2000:]
        assert "env.action_mask" in last_line(proc.stderr) and "Traceback" not in proc.stderr
    info = main("--config", "cartpole", "--set", 'env.action_mask="info"', "--total-timesteps", "256",
                "--run-dir", str(tmp_path / "cartpole"), *FAST)
    assert info.returncode == 2 and "no 'action_mask' key" in last_line(info.stderr), info.stderr[-2000:]
    box = main("--config", "pendulum", "--set", 'env.action_mask="info"', "--total-timesteps", "256",
               "--run-dir", str(tmp_path / "pendulum"))
    assert box.returncode == 2 and "Discrete, MultiDiscrete or MultiBinary" in last_line(box.stderr)


def test_a_near_miss_under_auto_is_exit_2_with_a_did_you_mean_not_an_unmasked_run(main, tmp_path):
    """info["action_masks"] (sb3-contrib's method name as an info key) used to train unmasked without a word."""
    proc = pick(main, tmp_path, "info", "discrete", steps=256, mask_name="action_masks")
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert line == ("error: env MaskedPick-v0: info has 'action_masks', not 'action_mask': did you mean "
                    "info['action_mask'] (env.action_mask = 'info')? env.action_mask = 'none' trains unmasked"), line
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("bad", ["shape", "dtype"])
def test_a_mask_of_the_wrong_shape_or_dtype_is_one_line_and_exit_2(main, tmp_path, bad):
    proc = pick(main, tmp_path, "info", "discrete", steps=256, bad_mask=bad)
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert ("shape" in line if bad == "shape" else "dtype float32" in line), line
    assert "Traceback" not in proc.stderr


def test_a_state_with_no_legal_action_is_exit_1_naming_sub_env_and_step_and_keeps_the_checkpoint(main, tmp_path):
    # 4 sub-envs, 64 steps a rollout: the checkpoint of update 1 is written before step 100 of every sub-env
    proc = pick(main, tmp_path, "info", "discrete", "--set", "run.checkpoint_every=1", steps=4096, no_legal_at=100)
    assert proc.returncode == 1, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert "sub-env 0 has no legal action at vector step 100" in line, line
    assert "last good checkpoint" in line and "Traceback" not in proc.stderr
    assert len(list((tmp_path / "run" / "checkpoints").glob("ckpt_*.pt"))) == 1


def test_a_mask_that_disappears_after_reset_is_a_training_fault_and_the_page_says_so(main, tmp_path):
    """Found on a step, not at start-up: exit 1 naming the env and the vector step (no checkpoint yet); the Action
    masks page used to promise exit 2 at start-up for it."""
    proc = pick(main, tmp_path, "info", "discrete", steps=256, drop_mask_at=1)
    assert proc.returncode == 1, proc.stderr[-2000:]
    line = last_line(proc.stderr)
    assert line == ("error: env MaskedPick-v0: env.action_mask = 'info': the env's info has no 'action_mask' key "
                    "(info keys: []) (at vector step 1); no checkpoint was written yet"), line
    assert "Traceback" not in proc.stderr
    page = (ROOT / "docs" / "guides" / "action-masks.md").read_text()
    errors = page.split("## Errors", 1)[1].split("\n## ", 1)[0]
    (bullet,) = [b for b in errors.split("\n- ") if "disappears after the first reset" in b]
    assert "exit\n  code 1" in bullet or "exit code 1" in bullet, bullet
    assert "exit code 2" not in bullet and line.replace("MaskedPick-v0", "MyEnv-v0") in bullet


def test_an_all_true_mask_gives_bit_identical_results_to_an_unmasked_run(tmp_path):
    """CartPole with an all-true info["action_mask"] against plain CartPole: the same metrics (but time) and
    the same parameters, with the default (per-state normalised) entropy bonus."""
    common = {"ppo.num_steps": 64, "env.num_envs": 4, "run.eval_episodes": 2, "ppo.ent_coef": None}
    overrides = [f"{k}={v}" for k, v in common.items() if v is not None]
    plain = train("cartpole", overrides=[*overrides, 'env.action_mask="none"'], total_timesteps=1024,
                  run_dir=tmp_path / "plain", progress=False)
    wrapper = 'env.wrappers=[{class="tests.integration.mask_envs:AllTrueMask"}]'
    masked = train("cartpole", overrides=[*overrides, wrapper], total_timesteps=1024, run_dir=tmp_path / "masked",
                   progress=False)
    del plain, masked

    def rows(run: Path):
        return [{k: v for k, v in r.items() if k not in ("seconds", "sps")}
                for r in csv.DictReader((run / "metrics.csv").open())]

    a, b = rows(tmp_path / "plain"), rows(tmp_path / "masked")
    assert a == b and len(a) == 4
    _, _, sa = load_agent(tmp_path / "plain")
    _, _, sb = load_agent(tmp_path / "masked")
    assert sb["action_mask"] == "info" and sa["action_mask"] is None
    for key, value in sa["model"].items():
        assert torch.equal(value, sb["model"][key]), key


def test_ent_coef_left_out_normalises_the_bonus_per_state_and_an_explicit_one_stays_fixed():
    agent = ActorCritic(3, spaces.Discrete(6), PolicyConfig())
    assert PPO(agent, PPOConfig(), 0.01).per_state_entropy
    assert not PPO(agent, PPOConfig(ent_coef=0.01), 0.01).per_state_entropy
    mask = torch.tensor([[True] * 6, [True, True, False, False, False, False], [True] + [False] * 5])
    weight = agent.entropy_weight(mask)
    assert weight[0] == 1.0 and weight[2] == 0.0
    assert abs(float(weight[1]) - np.log(6) / np.log(2)) < 1e-6


def test_load_policy_needs_its_mask_and_never_returns_a_masked_action(main, tmp_path):
    proc = pick(main, tmp_path, "obs", "multidiscrete", steps=1024)
    assert proc.returncode == 0, proc.stderr[-2000:]
    policy = load_policy(tmp_path / "run")
    env = MaskedPickEnv(convention="obs", space="multidiscrete")
    obs, _ = env.reset(seed=3)
    with pytest.raises(ValueError, match="pass action_mask=") as err:
        policy({"target": obs["target"]})
    assert "\n" not in str(err.value)
    for _ in range(50):  # a mask in the obs Dict, or given as an argument: every action is legal (env raises)
        action = policy(obs)
        assert np.array_equal(action, policy({"target": obs["target"]}, action_mask=obs["action_mask"]))
        obs, *_ = env.step(action)
    batch = {"target": np.stack([obs["target"]] * 3)}
    masks = np.stack([obs["action_mask"].astype(bool)] * 3)
    assert policy(batch, action_mask=masks).shape == (3, 2)
    with pytest.raises(ValueError, match="shape"):
        policy(batch, action_mask=masks[:, :5])
    with pytest.raises(ValueError, match="no legal action"):
        policy(batch, action_mask=np.zeros_like(masks))


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_export_with_masks_takes_the_mask_input_and_matches_the_policy(main, tmp_path, fmt):
    proc = pick(main, tmp_path, "info", "discrete", steps=1024)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = export_policy(tmp_path / "run", fmt, tmp_path / f"policy.{fmt}")
    assert result.input_names == ["obs", "action_mask"] and result.max_abs_diff == 0.0
    run = load_exported(result.path, fmt)
    policy = load_policy(tmp_path / "run")
    env = MaskedPickEnv(convention="info")
    obs, info = env.reset(seed=1)
    for _ in range(40):  # the exported file drives the env, which raises on an illegal action
        mask = info["action_mask"][None]
        action = np.asarray(run(*observation_inputs(obs[None], policy.observation_space), mask))
        assert action.dtype == np.int64 and int(action[0]) == int(policy(obs, action_mask=info["action_mask"]))
        obs, _, _, _, info = env.step(int(action[0]))


def test_multibinary_exports_int8_actions_and_load_policy_serves_it(main, tmp_path):
    proc = pick(main, tmp_path, "method", "multibinary", steps=1024)
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = export_policy(tmp_path / "run", "onnx", tmp_path / "bits.onnx")
    run = load_exported(result.path, "onnx")
    env = MaskedPickEnv(convention="method", space="multibinary")
    obs, _ = env.reset(seed=0)
    policy = load_policy(tmp_path / "run")
    for _ in range(20):
        mask = env.mask[None]
        action = np.asarray(run(obs[None].astype(np.float32), mask))
        assert action.dtype == np.int8 and action.shape == (1, 4)
        assert np.array_equal(action[0], policy(obs, action_mask=env.mask))
        obs, *_ = env.step(action[0])


@pytest.mark.parametrize("recurrent", ["lstm", "gru"])
def test_a_recurrent_masked_policy_solves_the_memory_task_a_feed_forward_one_cannot(main, tmp_path, recurrent):
    """CueChoice: the cue is shown once, the masked choice comes 3 steps later between the cue's action and a
    decoy. A feed-forward masked policy cannot tell them apart (about 0.5); LSTM and GRU remember (1.0).
    Also: a recurrent masked policy resumes, evaluates from its checkpoint and acts through load_policy."""
    args = ["--config", "cartpole", "--set", f'env.id="{CUE}"', "--set", "env.num_envs=8", "--set",
            "ppo.num_steps=32", "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=4", "--set",
            "ppo.learning_rate=3e-3", "--set", "ppo.gamma=0.9", "--set", "run.eval_episodes=40",
            "--set", "policy.hidden_sizes=[32]", "--set", "ppo.reward_scale=1.0"]
    mem = main(*args, "--set", f'policy.recurrent="{recurrent}"', "--set", "policy.rnn_hidden_size=32",
               "--total-timesteps", "12288", "--run-dir", str(tmp_path / "mem"))
    assert mem.returncode == 0, mem.stderr[-2000:]
    assert last_json(mem.stdout)["eval_return_mean"] >= 0.9, last_json(mem.stdout)
    if recurrent == "lstm":
        ff = main(*args, "--total-timesteps", "12288", "--run-dir", str(tmp_path / "ff"))
        assert ff.returncode == 0, ff.stderr[-2000:]
        assert last_json(ff.stdout)["eval_return_mean"] <= 0.75, last_json(ff.stdout)
    resumed = main("--resume", str(tmp_path / "mem"), "--total-timesteps", "14336")
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    assert last_json(resumed.stdout)["env_steps"] == 14336
    evaluated = main("eval", str(tmp_path / "mem"), "--episodes", "10")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert last_json(evaluated.stdout)["eval_return_mean"] >= 0.9
    if recurrent == "lstm":  # the mask input comes after the observation and before the recurrent state
        exported = export_policy(tmp_path / "mem", "onnx", tmp_path / "mem.onnx")
        assert exported.input_names == ["obs", "action_mask", "state", "episode_start"]
    policy = load_policy(tmp_path / "mem")
    env = CueChoiceEnv()
    total = 0.0
    for episode in range(20):
        obs, info = env.reset(seed=episode)
        policy.reset()
        done = False
        while not done:
            obs, reward, done, _, info = env.step(policy(obs, action_mask=info["action_mask"]))
            total += reward
    assert total >= 18


def test_taxi_masks_from_info_in_training_eval_and_video(main, tmp_path):
    """Gymnasium's Taxi gives info["action_mask"]; eval --video records an episode of the masked policy."""
    import gymnasium as gym

    taxi = "Taxi-v3" if "Taxi-v3" in gym.registry else "Taxi-v4"
    proc = main("--config", "cartpole", "--set", f'env.id="{taxi}"', "--total-timesteps", "1024",
                "--run-dir", str(tmp_path / "taxi"), *FAST)
    assert proc.returncode == 0, proc.stderr[-2000:]
    _, _, state = load_agent(tmp_path / "taxi")
    assert state["action_mask"] == "info"
    video = main("eval", str(tmp_path / "taxi"), "--episodes", "1", "--video")
    assert video.returncode == 0, video.stderr[-2000:]
    assert open(last_json(video.stdout)["videos"][0], "rb").read()[4:8] == b"ftyp"


def test_torchrun_two_ranks_with_masks(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
    proc = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                           str(ROOT / "main.py"), "--config", "cartpole", "--set", f'env.id="{PICK}"',
                           "--set", 'env.kwargs={convention = "method"}', "--total-timesteps", "2048",
                           "--run-dir", str(tmp_path / "run"), *FAST], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = last_json(proc.stdout)
    assert summary["world_size"] == 2 and summary["env_steps"] == 2048
    _, _, state = load_agent(tmp_path / "run")
    assert state["action_mask"] == "method"


def test_a_next_step_vector_env_with_masks_trains_and_its_dummy_rows_get_an_all_true_mask(tmp_path):
    """A user's ready vector env in gymnasium's default NEXT_STEP mode: the step after an episode ends is a
    dummy that ignores the action; its row's mask is all true (a stale mask must not matter)."""
    import gymnasium as gym

    from shell.config import load_config
    from shell.envs import make_env

    from .mask_envs import make_masked_pick

    def vector():
        return gym.vector.SyncVectorEnv([lambda: make_masked_pick("info", length=3)] * 4)

    env = make_env(load_config("cartpole").env, torch.device("cpu"), source=vector())
    try:
        env.reset(seed=0)
        assert env.mask_source == "info" and env.action_mask.shape == (4, 6)
        for _ in range(3):
            mask = env.action_mask
            action = mask.long().argmax(dim=1)  # the first legal action of each row
            env.step(action)
        assert not env.valid.any() and env.action_mask.all()  # every sub-env's next step is a dummy
    finally:
        env.close()
    result = train("cartpole", env=vector(), overrides=["ppo.num_steps=32", "run.eval_episodes=0"],
                   total_timesteps=256, run_dir=tmp_path / "run", progress=False)
    assert result.summary["env_steps"] == 256


@pytest.mark.parametrize("space", [spaces.Discrete(5, start=2), spaces.MultiDiscrete([3, 1, 4]),
                                   spaces.MultiBinary(6)])
@pytest.mark.parametrize("recurrent", ["none", "gru"])
def test_no_path_of_the_policy_returns_an_action_its_mask_forbids(space, recurrent):
    """Every way the policy picks an action (rollout sample, batched sample, deterministic act, recurrent
    step), with random masks that leave each component a legal action and large random weights."""
    from shell.envs.masks import component_sizes, mask_size

    torch.manual_seed(0)
    agent = ActorCritic(4, space, PolicyConfig(recurrent=recurrent, hidden_sizes=[16]))
    with torch.no_grad():
        for p in agent.parameters():
            p.mul_(50.0)  # confident logits: an illegal favourite is common
    rng = np.random.default_rng(0)
    n, size = 64, mask_size(space)
    generator = torch.Generator().manual_seed(1)

    def legal(action: torch.Tensor, mask: np.ndarray) -> bool:
        a = action.reshape(n, -1).numpy()
        if isinstance(space, spaces.MultiBinary):
            return not np.any(a.astype(bool) & ~mask)
        index = a - np.asarray(space.start).reshape(1, -1)
        offsets = np.concatenate([[0], np.cumsum(component_sizes(space))[:-1]])
        return bool(np.take_along_axis(mask, index + offsets, axis=1).all())

    for _ in range(20):
        mask = rng.random((n, size)) < 0.3
        start = 0
        for k in component_sizes(space):
            block = mask[:, start:start + k]
            block[np.arange(n), rng.integers(0, k, n)] |= ~block.any(axis=1)
            start += k
        m = torch.as_tensor(mask)
        obs = torch.randn(n, 4)
        state = agent.initial_state(n)
        starts = torch.ones(n, dtype=torch.bool)
        with torch.no_grad():
            sample, _ = agent.rollout_step(obs, state, starts, generator, m)
            assert legal(sample.action, mask)
            for deterministic in (True, False):
                action, _ = agent.act_step(obs, state, starts, deterministic, generator, action_mask=m)
                assert legal(action, mask)
            if recurrent == "none":
                assert legal(agent.sample_action(obs, generator, m)[0], mask)
                log_prob, entropy, _ = agent.evaluate(obs, sample.raw_action, generator, m)
                assert torch.isfinite(log_prob).all() and torch.isfinite(entropy).all()


@pytest.mark.parametrize("convention", ["info", "obs"])
def test_the_mlflow_pyfunc_model_of_a_masked_policy_takes_its_mask(main, tmp_path, convention):
    """``predict({"obs": obs, "action_mask": mask})`` (an array observation) or the Dict observation with its
    ``"action_mask"`` key: the same actions as ``load_policy``, every one legal; no mask is a one-line error."""
    pytest.importorskip("mlflow")
    import mlflow.pyfunc

    from shell.tracking.mlflow_tracker import save_policy_model

    proc = pick(main, tmp_path, convention, steps=1024)
    assert proc.returncode == 0, proc.stderr[-2000:]
    save_policy_model(Path(last_json(proc.stdout)["checkpoint"]), tmp_path / "model")
    model = mlflow.pyfunc.load_model(str(tmp_path / "model"))
    policy = load_policy(tmp_path / "run")
    env = MaskedPickEnv(convention=convention)
    rows = [env.reset(seed=s) for s in range(32)]
    if convention == "obs":
        batch = {k: np.stack([obs[k] for obs, _ in rows]) for k in rows[0][0]}
        masks, model_input = batch["action_mask"].astype(bool), batch
        plain = {k: v for k, v in batch.items() if k != "action_mask"}
    else:
        plain = np.stack([obs for obs, _ in rows])
        masks = np.stack([info["action_mask"] for _, info in rows]).astype(bool)
        model_input = {"obs": plain, "action_mask": masks}
    predicted = np.asarray(model.predict(model_input))
    assert np.array_equal(predicted, policy(plain, action_mask=masks))
    assert masks[np.arange(32), predicted].all()
    with pytest.raises(ValueError, match="pass action_mask=") as err:
        model.predict(plain)
    assert "\n" not in str(err.value)
