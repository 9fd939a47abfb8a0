"""The Platform domain (shell/envs/platform.py): gymnasium's checker, transitions pinned to numbers worked out by
hand from the constants, the ends of an episode, the 200-action time limit, and seeding.

The hand-worked transitions use a noise source that always draws 0 (``ZeroNoise``), so the arithmetic is the
deterministic part of the dynamics. Constants used below (cycraig/gym-platform, platform_env.py): DT = 0.05,
decay 0.99 per frame, speed bound on a platform 70, x-speed change per frame at most MAX_DDX * DT = 600 * 0.05 = 30,
gravity 9.8 * 0.05 = 0.49 per frame, hop take-off dy 35 and duration 2 * 35 / 9.8 + 1 = 8.142857, goal x 1035,
observation x scaled as (x + 20) / 1055, x speed as dx / 100, enemy x as x / 1035, enemy dx as (dx + 30) / 60.
"""

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import shell  # noqa: F401  (registers Platform-v0)
from shell.envs.platform import KINDS, MAX_EPISODE_STEPS, PlatformEnv, register

# A script that reaches the goal (found by search; it does so for every seed tried, 300 of them): hop over
# enemy 1, run to the edge, hop the first gap, hop over enemy 2, run to the edge, hop the second gap, run.
GOOD_SCRIPT = [(1, 720.0), (0, 30.0), (0, 0.0), (1, 720.0), (1, 720.0), (0, 8.0), (0, 0.0), (1, 720.0),
               (0, 30.0), (0, 30.0)]


class ZeroNoise:
    """Stands in for ``env.np_random``: every normal draw is 0."""

    def normal(self, loc: float, scale: float, size: int | None = None) -> float | np.ndarray:
        return 0.0 if size is None else np.zeros(size)


def action(kind: int, parameter: float, others: float = 0.0) -> dict:
    """A Dict action of the given kind; the other kinds' parameters are set to `others`."""
    params = {name: np.array([others], dtype=np.float32) for name in KINDS}
    params[KINDS[kind]] = np.array([parameter], dtype=np.float32)
    return {"kind": kind, **params}


def noiseless() -> PlatformEnv:
    env = PlatformEnv()
    env.reset(seed=0)
    env.np_random = ZeroNoise()
    return env


def test_gymnasium_env_checker_passes():
    # check_env runs the passive checker, seeding determinism of reset and step, and the spaces' contracts;
    # its render checks do not apply (render_mode None only), so they are skipped. Any warning fails, except
    # the advice to normalise Box actions to [-1, 1]: the parameters keep the reference's bounds on purpose.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        warnings.filterwarnings("ignore", message=".*symmetric and normalized space")
        check_env(PlatformEnv(), skip_render_check=True)


def test_spaces_and_registration():
    env = gym.make("Platform-v0")
    assert env.spec.max_episode_steps == MAX_EPISODE_STEPS == 200
    register()  # idempotent
    assert gym.spec("Platform-v0").max_episode_steps == 200
    obs_space, act_space = env.observation_space, env.action_space
    assert obs_space.shape == (9,) and obs_space.dtype == np.float32
    assert float(obs_space.low.min()) == 0.0 and float(obs_space.high.max()) == 1.0
    assert act_space["kind"].n == 3
    for name, high in (("run", 30.0), ("hop", 720.0), ("leap", 430.0)):
        box = act_space[name]
        assert box.shape == (1,) and box.dtype == np.float32
        assert box.low.tolist() == [0.0] and box.high.tolist() == [high]
    with pytest.raises(ValueError, match="render_mode"):
        PlatformEnv(render_mode="human")
    with pytest.raises(ValueError, match="kind"):
        noiseless().step({**action(0, 0.0), "kind": 3})


def test_reset_state_is_fixed():
    obs, info = PlatformEnv().reset(seed=123)
    # player x 0 -> 20 / 1055; dx 0; enemy 1 at 250 - 20 = 230 -> 230 / 1035; enemy dx -30 -> 0 / 60;
    # platform 1's width 250 / 275, platform 2's 275 / 275, gap 1 225 / 235, left edge 0, height difference 0
    expected = [20 / 1055, 0.0, 230 / 1035, 0.0, 250 / 275, 1.0, 225 / 235, 0.0, 0.0]
    np.testing.assert_allclose(obs, np.array(expected, dtype=np.float32), rtol=0, atol=0)
    assert info == {"frames": 0}


def test_one_run_by_hand():
    env = noiseless()
    obs, reward, terminated, truncated, info = env.step(action(0, 1.0))
    # run(1) lasts 20 frames; each adds 1 to the x speed u, which then decays: u_k = 100 (1 - 0.99^k), and the
    # player moves 0.05 u_k in frame k. x = 0.05 * 100 * sum_k (1 - 0.99^k) = 5 (20 - 99 (1 - 0.99^20))
    # = 100 - 495 * (1 - 0.8179069376) = 9.8639341106; dx = 0.99 u_20 = 99 * 0.1820930624 = 18.0272131779.
    x, dx = 9.8639341106, 18.0272131779
    # Enemy 1 at 230 is not strictly inside (0, 230), so frame 1 turns it to +30 and the bound keeps it at 230;
    # frame 2 turns it back to -30: 228.5; frames 3..20 move it 18 * 1.5 = 27 more: 201.5, dx -30.
    assert info == {"frames": 20} and not terminated and not truncated
    assert reward == pytest.approx(x / 1035, abs=1e-10)  # 0.0095303711
    assert env.x == pytest.approx(x, abs=1e-9) and env.dx == pytest.approx(dx, abs=1e-9)
    expected = [(x + 20) / 1055, dx / 100, 201.5 / 1035, 0.0, 250 / 275, 1.0, 225 / 235, 0.0, 0.0]
    np.testing.assert_allclose(obs, expected, atol=1e-6)


def test_one_hop_by_hand():
    env = noiseless()
    obs, reward, terminated, _, info = env.step(action(1, 720.0))
    # Take-off: the x speed change aimed at is 720 / 8.142857 = 88.42, an acceleration of 88.42 / 0.05 = 1768.4,
    # bounded to 600, so dx = 600 * 0.05 = 30; dy = 35. In the air dy drops 0.49 a frame: after k frames
    # y = 40 + 0.05 (35 k - 0.245 k (k - 1)); k = 143: 41.5015, k = 144: 39.748 < 40, so it lands (pushed up
    # onto platform 1, x speed set to 0) after 144 frames. x = 0.05 * 30 * sum_{j<144} 0.99^j
    # = 150 (1 - 0.99^144) = 150 * (1 - 0.2352166292) = 114.7175056139; at the top of the arc (about 63 above the
    # platform) it passes over enemy 1, which walks from 230 to 228.5 - 142 * 1.5 = 15.5.
    x = 114.7175056139
    assert info == {"frames": 144} and not terminated
    assert reward == pytest.approx(x / 1035, abs=1e-10)  # 0.1108381697
    assert (env.x, env.y, env.dx, env.dy) == (pytest.approx(x, abs=1e-9), 40.0, 0.0, 0.0)
    assert obs[0] == pytest.approx((x + 20) / 1055, abs=1e-6) and obs[1] == 0.0
    assert obs[2] == pytest.approx(15.5 / 1035, abs=1e-6)


def test_falling_into_the_first_gap_ends_the_episode():
    env = noiseless()
    env.step(action(1, 720.0))  # to x = 114.7175056139, at rest (previous test)
    _, reward, terminated, _, _ = env.step(action(0, 30.0))
    # run(30) from rest: frame 1 dx 30 (x + 1.5), decays to 29.7; frame 2: 59.7 (x + 2.985), decays to 59.103;
    # frame 3: 89.103, bounded to 70 on the platform (x + 3.5), and so on for frames 3..20: 18 * 3.5 = 63.
    # x = 114.7175056139 + 67.485 = 182.2025056139, dx = 69.3
    assert not terminated and reward == pytest.approx(67.485 / 1035, abs=1e-10)
    _, _, terminated, _, _ = env.step(action(0, 30.0))
    # 20 more frames at 3.5: x = 252.2025056139. Platform 1 ends at 250, but the check is at the start of each
    # frame (x = 248.70 before frame 20), so the player is still standing, at y = 40.
    assert not terminated and env.x == pytest.approx(252.2025056139, abs=1e-9) and env.y == 40.0
    _, reward, terminated, _, info = env.step(action(1, 720.0))
    # Off the platform: gravity instead of the hop; y = 40 - 0.49 * 0.05 = 39.9755 < 40 over the gap: the episode
    # ends after 1 frame, having moved 69.3 * 0.05 = 3.465.
    assert terminated and info == {"frames": 1}
    assert env.y == pytest.approx(39.9755, abs=1e-12)
    assert reward == pytest.approx(3.465 / 1035, abs=1e-10)


def test_touching_an_enemy_ends_the_episode():
    env = noiseless()
    env.step(action(0, 30.0))  # x = 67.485, dx = 69.3 (as above); enemy 1 at 201.5 (run(1) test)
    env.step(action(0, 30.0))  # x = 137.485; enemy 1 at 201.5 - 20 * 1.5 = 171.5: 34.015 apart
    _, reward, terminated, _, info = env.step(action(0, 30.0))
    # They close 3.5 + 1.5 = 5 a frame: 29.015, 24.015, 19.015 < 20 (the bodies are 20 wide): caught at frame 3.
    assert terminated and info == {"frames": 3}
    assert reward == pytest.approx(3 * 3.5 / 1035, abs=1e-10)
    assert env.enemy_x[0] == pytest.approx(167.0, abs=1e-9)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a_good_script_returns_one(seed):
    env = gym.make("Platform-v0")
    obs, _ = env.reset(seed=seed)
    total, terminated = 0.0, False
    for kind, parameter in GOOD_SCRIPT:
        obs, reward, terminated, truncated, _ = env.step(action(kind, parameter))
        total += reward
        if terminated or truncated:
            break
    # the reward telescopes: sum of (x_after - x_before) / 1035 from x = 0 to the goal at x = 1035
    assert terminated and total == pytest.approx(1.0, abs=1e-12)
    assert obs[0] == 1.0  # (1035 + 20) / 1055


def test_time_limit_truncates_at_200_actions():
    env = gym.make("Platform-v0")
    env.reset(seed=0)
    for kind, parameter in GOOD_SCRIPT[:8]:  # on platform 3 (no enemy), at rest short of the goal
        env.step(action(kind, parameter))
    for t in range(9, MAX_EPISODE_STEPS + 1):
        # run(0): the x speed stays 0 (its noise only slows, and the speed is bounded below by 0)
        _, reward, terminated, truncated, _ = env.step(action(0, 0.0))
        assert not terminated and reward == 0.0
        assert truncated == (t == MAX_EPISODE_STEPS)


def test_only_the_chosen_kinds_parameter_matters():
    rng = np.random.default_rng(0)
    highs = {name: PlatformEnv().action_space[name].high[0] for name in KINDS}
    # the good script, and its first n actions followed by random ones (so that every platform is covered)
    scripts = [GOOD_SCRIPT] + [GOOD_SCRIPT[:n] + [(int(k), float(rng.uniform(0, highs[KINDS[k]])))
                                                  for k in rng.integers(0, 3, 30)] for n in (0, 3, 5, 7)]
    for seed, script in enumerate(scripts):
        runs = []
        for others in ("zeros", "highs", "random"):
            env = PlatformEnv()
            env.reset(seed=seed)
            env.action_space.seed(seed + 100)
            steps = []
            for kind, parameter in script:
                act = {"zeros": action(0, 0.0), "highs": action(0, 30.0, others=720.0),
                       "random": env.action_space.sample()}[others]
                act["kind"] = kind
                act[KINDS[kind]] = np.array([parameter], dtype=np.float32)
                steps.append(env.step(act))
                if steps[-1][2]:
                    break
            runs.append(steps)
        assert runs[0][-1][2]  # each script is played to the end of its episode
        for steps in runs[1:]:
            assert len(steps) == len(runs[0])
            for a, b in zip(steps, runs[0], strict=True):
                np.testing.assert_array_equal(a[0], b[0])
                assert a[1:] == b[1:]


def test_same_seed_same_trajectory():
    def trajectory(seed):
        env = PlatformEnv()
        env.action_space.seed(11)
        rows = [env.reset(seed=seed)[0]]
        for _ in range(30):
            obs, reward, terminated, _, info = env.step(env.action_space.sample())
            rows.append(np.append(obs, [reward, terminated, info["frames"]]))
            if terminated:
                rows.append(env.reset()[0])
        return np.concatenate(rows)

    np.testing.assert_array_equal(trajectory(3), trajectory(3))
    assert not np.array_equal(trajectory(3), trajectory(4))


def test_noise_only_slows_the_player():
    # The player's noise is -|N(0, 0.025)| on the x speed each frame: a noisy run(1) ends a little short of the
    # noiseless 9.8639341106 (previous test), never past it.
    for seed in range(5):
        env = PlatformEnv()
        env.reset(seed=seed)
        env.step(action(0, 1.0))
        assert 9.8639341106 - 0.5 < env.x < 9.8639341106
