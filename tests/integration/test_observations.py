"""Images and structured observations: encoders, layouts, uint8 storage, Dict spaces, env kwargs,
the Atari chain on a stub game, and short DoorKey and Pong runs through main.py."""

import csv
import json

import gymnasium as gym
import numpy as np
import pytest
import torch

from shell.config import PolicyConfig, config_from_dict
from shell.errors import ConfigError
from shell.inference import load_policy
from shell.observations import obs_layout, to_tensor
from shell.policies import ActorCritic
from shell.policies.encoders import ImageEncoder, channels_first
from shell.runner import Trainer

from .custom_envs import STUB_ATARI_SCORE

CUSTOM = "tests.integration.custom_envs"
TINY = ["--set", "env.num_envs=2", "--set", "ppo.num_steps=32", "--set", "ppo.num_minibatches=2",
        "--set", "ppo.update_epochs=2", "--set", "run.eval_episodes=2"]


def last_json(text: str) -> dict:
    return json.loads(text.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- encoders
@pytest.mark.parametrize(("shape", "first"), [((4, 84, 84), True), ((84, 84, 4), False), ((7, 7, 3), False),
                                              ((3, 64, 64), True), ((64, 64, 3), False), ((2, 2, 2), True)])
def test_channel_order_is_detected_from_the_space(shape, first):
    assert channels_first(shape) is first


def test_channel_order_override():
    assert channels_first((7, 7, 3), override=True) is True
    assert channels_first((4, 84, 84), override=False) is False
    part = obs_layout(gym.spaces.Box(0, 255, (6, 6, 4), np.uint8)).parts[None]
    assert ImageEncoder(part, PolicyConfig()).channels_first is False
    assert ImageEncoder(part, PolicyConfig(image_channels_first=True)).channels_first is True
    small = obs_layout(gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)).parts[None]
    with pytest.raises(ConfigError, match=r"7x3 .*image_channels_first"):
        ImageEncoder(small, PolicyConfig(image_channels_first=True))


@pytest.mark.parametrize(("space", "cnn", "features"), [
    (gym.spaces.Box(0, 255, (4, 84, 84), np.uint8), "nature", 512),
    (gym.spaces.Box(0, 255, (84, 84, 3), np.uint8), "nature", 512),
    (gym.spaces.Box(0, 255, (7, 7, 3), np.uint8), "small", 64),
    (gym.spaces.Box(0.0, 1.0, (3, 36, 36), np.float32), "nature", 512),
    (gym.spaces.Box(0.0, 1.0, (3, 35, 35), np.float32), "small", 64 * 15 * 15),
])
def test_image_encoder_output_shapes(space, cnn, features):
    encoder = ImageEncoder(obs_layout(space).parts[None], PolicyConfig())
    assert encoder.kind == cnn and encoder.features_dim == features
    batch = torch.as_tensor(np.stack([space.sample() for _ in range(5)]))
    assert encoder(batch).shape == (5, features)


def test_board_cnn_keeps_the_board_and_is_as_wide_as_its_last_layer():
    """policy.cnn = "board": 3x3 convolutions with padding 1, so a connect-four board (6x7, channels last) gives
    one feature vector per cell; a piece moved one column over (away from the edges) moves the maps with it."""
    space = gym.spaces.Box(0, 1, (6, 7, 2), np.int8)
    cfg = PolicyConfig(cnn="board", cnn_channels=[8, 4])
    encoder = ImageEncoder(obs_layout(space).parts[None], cfg)
    assert encoder.kind == "board" and encoder.features_dim == 4 * 6 * 7
    convs = [m for m in encoder.net.modules() if isinstance(m, torch.nn.Conv2d)]
    assert [(c.in_channels, c.out_channels, c.kernel_size, c.padding) for c in convs] == [
        (2, 8, (3, 3), (1, 1)), (8, 4, (3, 3), (1, 1))]
    board = torch.zeros(2, 6, 7, 2, dtype=torch.int8)
    board[0, 5, 2, 0] = 1  # one piece in column 2 of the bottom row
    board[1, 5, 3, 0] = 1  # the same piece in column 3
    with torch.no_grad():
        maps = encoder(board).reshape(2, 4, 6, 7)
    # columns 0-4 of the first board and 1-5 of the second see the same neighbourhoods (a 5x5 receptive field)
    torch.testing.assert_close(maps[1, :, :, 1:6], maps[0, :, :, 0:5])
    assert not torch.equal(maps[0], maps[1])


def test_every_kind_of_observation_gives_flat_features_and_policy_outputs():
    spaces = {
        "flat": gym.spaces.Box(-1, 1, (2, 3), np.float32),
        "onehot": gym.spaces.Discrete(5, start=2),
        "image": gym.spaces.Box(0, 255, (4, 84, 84), np.uint8),
        "dict": gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (7, 7, 3), np.uint8),
                                 "vec": gym.spaces.Box(-1, 1, (3,), np.float32), "d": gym.spaces.Discrete(4)}),
    }
    features = {"flat": 6, "onehot": 5, "image": 512, "dict": 64 + 3 + 4}
    for name, space in spaces.items():
        agent = ActorCritic(space, gym.spaces.Discrete(3), PolicyConfig())
        layout = agent.layout
        obs = to_tensor(np.stack([space.sample() for _ in range(4)]) if not layout.is_dict else
                        {k: np.stack([space.sample()[k] for _ in range(4)]) for k in space.spaces}, layout,
                        torch.device("cpu"))
        assert agent.encoder.features_dim == features[name], name
        out = agent.get_action(obs)
        assert out.action.shape == out.log_prob.shape == out.value.shape == (4,), name


def test_a_mixed_dict_is_accepted_and_unencodable_keys_are_refused():
    space = gym.spaces.Dict({"img": gym.spaces.Box(0, 255, (12, 12, 3), np.uint8),
                             "vec": gym.spaces.Box(-1, 1, (3,)), "d": gym.spaces.Discrete(3)})
    layout = obs_layout(space)
    assert {k: p.kind for k, p in layout.parts.items()} == {"img": "image", "vec": "flat", "d": "onehot"}
    with pytest.raises(ConfigError, match=r"observation key 'note'.*Text.*env\.obs_keys = \['img'\]") as info:
        obs_layout(gym.spaces.Dict({"img": space["img"], "note": gym.spaces.Text(5)}))
    assert "\n" not in str(info.value)


def test_pixels_are_scaled_inside_the_network_and_stay_uint8_in_storage(tmp_path):
    cfg = config_from_dict({"env": {"id": f"{CUSTOM}:MixedDict-v0", "num_envs": 2},
                            "ppo": {"num_steps": 8, "num_minibatches": 2, "update_epochs": 1},
                            "run": {"total_timesteps": 16, "eval_episodes": 0, "device": "cpu"}})
    trainer = Trainer(cfg, tmp_path)
    obs = trainer.lanes.only.storage.obs
    assert obs["pixels"].dtype == torch.uint8 and obs["pixels"].shape == (8, 2, 12, 12, 3)
    assert obs["vector"].dtype == torch.float32 and obs["mode"].shape == (8, 2, 3)
    trainer.train()
    assert int(obs["pixels"].max()) > 1  # raw pixels, not scaled, in storage
    encoder = trainer.agent.encoder.encoders["pixels"]
    seen = {}
    first = encoder.net[0]
    handle = first.register_forward_hook(lambda _m, inputs, _o: seen.update(x=inputs[0]))
    with torch.no_grad():
        trainer.agent.encoder({k: v[0] for k, v in obs.items()})
    handle.remove()
    x = seen["x"]
    assert x.dtype == torch.float32 and x.shape == (2, 3, 12, 12) and 0.0 <= float(x.min()) and float(x.max()) <= 1.0
    assert torch.allclose(x, obs["pixels"][0].permute(0, 3, 1, 2).float() / 255)
    assert trainer.agent.shared  # an image: one encoder for actor and critic by default


def test_symbolic_grids_are_one_hot_encoded():
    part = obs_layout(gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)).parts[None]
    encoder = ImageEncoder(part, PolicyConfig(image_encoding="onehot", image_codes=11))
    seen = {}
    encoder.net[0].register_forward_hook(lambda _m, inputs, _o: seen.update(x=inputs[0]))
    grid = torch.randint(0, 11, (2, 7, 7, 3), dtype=torch.uint8)
    encoder(grid)
    x = seen["x"]
    assert x.shape == (2, 33, 7, 7) and set(x.unique().tolist()) == {0.0, 1.0}
    assert torch.equal(x.view(2, 3, 11, 7, 7).argmax(2), grid.permute(0, 3, 1, 2).long())


def test_embedded_codes_equal_one_hot_planes_through_a_1x1_convolution():
    part = obs_layout(gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)).parts[None]
    encoder = ImageEncoder(part, PolicyConfig(image_encoding="embed", image_codes=11, image_embed_dim=5))
    seen = {}
    encoder.net[0].register_forward_hook(lambda _m, inputs, _o: seen.update(x=inputs[0]))
    grid = torch.randint(0, 11, (2, 7, 7, 3), dtype=torch.uint8)
    assert encoder(grid).shape == (2, encoder.features_dim)
    planes = torch.nn.functional.one_hot(grid.long(), 11).permute(0, 3, 4, 1, 2).reshape(2, 33, 7, 7).float()
    weight = encoder.embedding.weight.detach().T[:, :, None, None]  # [5, 33, 1, 1]
    assert torch.allclose(seen["x"], torch.nn.functional.conv2d(planes, weight), atol=1e-6)


def test_share_encoder_setting():
    space = gym.spaces.Box(0, 255, (7, 7, 3), np.uint8)
    assert ActorCritic(space, gym.spaces.Discrete(3), PolicyConfig()).critic_encoder is None
    separate = ActorCritic(space, gym.spaces.Discrete(3), PolicyConfig(share_encoder=False))
    assert separate.critic_encoder is not None and separate.critic_encoder is not separate.encoder
    assert ActorCritic(3, gym.spaces.Discrete(3), PolicyConfig()).critic_encoder is not None  # vectors: separate


# ----------------------------------------------------------------------------- env kwargs, obs_keys, errors
def test_env_kwargs_reach_gym_make_and_are_saved(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:Switchable-v0", "--set",
                "env.kwargs.continuous=true", *TINY, "--total-timesteps", "64", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "kwargs = { continuous = true }" in (run / "config.toml").read_text()
    result = last_json(main("eval", str(run), "--episodes", "1").stdout)
    assert result["eval_episodes"] == 1
    policy = load_policy(run)
    assert policy.action_space.shape == (2,)  # the kwarg reached gym.make again when the run was rebuilt


def test_a_bad_env_kwarg_is_one_line_and_leaves_no_run_dir(main, tmp_path):
    proc = main("--config", "cartpole", "--set", "env.kwargs.no_such_option=3", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "no_such_option" in line and "CartPole-v1" in line
    assert not (tmp_path / "r").exists()


def test_an_env_that_asserts_on_its_kwargs_is_one_line_and_leaves_no_run_dir(main, tmp_path):
    # MiniGrid asserts width >= 3 inside its constructor: an AssertionError, not a TypeError
    proc = main("--config", "doorkey", "--set", "env.kwargs.size=2", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert "AssertionError" in line and "env.kwargs = {'size': 2}" in line and not (tmp_path / "r").exists()


@pytest.mark.parametrize(("env_id", "needle"), [("TextKeyObs-v0", "Text"), ("CustomKeyObs-v0", "_CustomSpace")])
def test_unencodable_keys_are_refused_through_the_cli(main, tmp_path, env_id, needle):
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:{env_id}", "--run-dir", str(tmp_path / "r"))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    line = proc.stderr.strip().splitlines()[-1]
    assert needle in line and "env.obs_keys" in line and not (tmp_path / "r").exists()
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:{env_id}", "--set", 'env.obs_keys=["a"]',
                *TINY, "--total-timesteps", "64", "--run-dir", str(tmp_path / "ok"))
    assert proc.returncode == 0, proc.stderr[-2000:]


def test_mixed_dict_run_evaluates_plots_and_deploys(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "cartpole", "--set", f"env.id={CUSTOM}:MixedDict-v0", *TINY,
                "--total-timesteps", "128", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert last_json(main("eval", str(run), "--episodes", "2").stdout)["eval_episodes"] == 2
    assert main("plot", str(run)).returncode == 0
    env = gym.make(f"{CUSTOM}:MixedDict-v0")
    obs, _ = env.reset(seed=0)
    policy = load_policy(run)
    assert env.action_space.contains(policy(obs))
    batch = {k: np.stack([obs[k]] * 3) for k in obs}
    assert policy(batch).shape == (3,)


# ----------------------------------------------------------------------------- Atari chain on a stub game
def test_atari_chain_reports_the_unclipped_game_score(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "pong", "--set", f"env.id={CUSTOM}:StubAtari-v0", "--set", "env.backend=gymnasium",
                "--set", "env.num_envs=2",
                "--set", "ppo.num_steps=128", "--set", "ppo.num_minibatches=2", "--set", "ppo.update_epochs=1",
                "--set", "run.eval_episodes=2", "--total-timesteps", "512", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    # sign-clipped for training, but the episode statistics and the evaluation report the game score
    assert summary["eval_return_mean"] == STUB_ATARI_SCORE == 161.0
    with open(run / "metrics.csv", newline="") as f:
        returns = [float(r["episodic_return"]) for r in csv.DictReader(f) if r["episodic_return"]]
    assert returns and all(r == STUB_ATARI_SCORE for r in returns)


@pytest.mark.parametrize("life_loss", [False, True])
def test_life_loss_ends_training_episodes_but_not_the_game(tmp_path, life_loss):
    cfg = config_from_dict({
        "env": {"id": f"{CUSTOM}:StubAtari-v0", "num_envs": 2, "atari": True, "sign_reward": True,
                "terminal_on_life_loss": life_loss},
        "policy": {"hidden_sizes": [], "cnn": "nature", "activation": "relu"},
        "ppo": {"num_steps": 128, "num_minibatches": 2, "update_epochs": 1},
        "run": {"total_timesteps": 256, "eval_episodes": 1, "device": "cpu"}})
    trainer = Trainer(cfg, tmp_path)
    obs = trainer.env.reset(seed=0)
    obs, episodes = trainer.collect(obs)
    episodes = episodes[None]
    rewards, dones = trainer.lanes.only.storage.rewards, trainer.lanes.only.storage.dones
    assert set(rewards.unique().tolist()) <= {-1.0, 0.0, 1.0}  # sign-clipped for training
    # a game is 400 frames = at most 100 agent steps after the no-ops: 1-2 games per env in 128 steps,
    # each with 3 lives lost along the way
    games = int(episodes[0])
    assert games >= 2 and float(episodes[1]) == games * STUB_ATARI_SCORE  # whole games, game score
    if life_loss:  # each finished game also lost 3 lives on the way, and the game went on after each
        assert int(dones.sum()) >= 4 * games
    else:
        assert int(dones.sum()) == games
    summary = trainer.train()
    assert summary["eval_return_mean"] == STUB_ATARI_SCORE  # evaluation plays whole games either way


# ----------------------------------------------------------------------------- real games, short runs
def test_short_doorkey_run(main, tmp_path):
    run = tmp_path / "run"
    proc = main("--config", "doorkey", "--total-timesteps", "2048", "--set", "run.eval_episodes=2",
                "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["env_steps"] == 2048 and summary["eval_episodes"] == 2
    assert main("--resume", str(run), "--total-timesteps", "8192").returncode == 0
    assert last_json(main("eval", str(run), "--episodes", "1").stdout)["env_steps"] == 8192
    video = main("eval", str(run), "--episodes", "1", "--video")
    assert video.returncode == 0, video.stderr[-2000:]
    assert open(last_json(video.stdout)["videos"][0], "rb").read()[4:8] == b"ftyp"
    assert main("plot", str(run)).returncode == 0  # episodes end within 250 steps: 384 per env since the resume
    policy = load_policy(run)  # built from the checkpoint's spaces: minigrid is imported only for the env below
    env = gym.wrappers.FilterObservation(gym.make("minigrid:MiniGrid-DoorKey-5x5-v0"), ["image", "direction"])
    assert env.action_space.contains(policy(env.reset(seed=0)[0]))


def test_short_pong_run(main, tmp_path):
    """gymnasium's Python chain (pong.toml's own backend is "ale": tests/integration/test_ale_backend.py)."""
    run = tmp_path / "run"
    proc = main("--config", "pong", "--set", "env.backend=gymnasium", "--total-timesteps", "1024",
                "--set", "run.eval_episodes=1",
                "--set", "run.eval_max_episode_steps=100", "--run-dir", str(run))
    assert proc.returncode == 0, proc.stderr[-2000:]
    summary = last_json(proc.stdout)
    assert summary["env_steps"] == 1024 and summary["eval_truncated_episodes"] == 1
    state = torch.load(summary["checkpoint"], weights_only=True)
    assert state["config"]["policy"]["cnn"] == "nature" and state["config"]["env"]["atari"] is True
