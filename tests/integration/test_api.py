"""The Python API (shell.train / shell.resume): env factories, ready vector envs (NEXT_STEP), callbacks,
and a caller's process left alone."""

import json
import re
import signal
from pathlib import Path

import attrs
import gymnasium as gym
import numpy as np
import pytest
import torch
from gymnasium.vector import AutoresetMode

import shell
import tests.integration.custom_envs  # noqa: F401 - registers Counting-v0
from shell.config import config_from_dict
from shell.errors import ConfigError
from shell.runner import Trainer
from tests.integration.conftest import ROOT
from tests.integration.custom_envs import COUNTING_LENGTHS, COUNTING_LIMIT


class MatchSign(gym.Env):
    """Defined here and never registered: observe +1 or -1, act 1 for +1 and 0 for -1; reward 1 when
    right; 10 steps an episode (the best return is 10)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self._draw(), {}

    def _draw(self):
        self.sign = float(self.np_random.choice([-1.0, 1.0]))
        return np.array([self.sign], np.float32)

    def step(self, action):
        reward = 1.0 if (int(action) == 1) == (self.sign > 0) else 0.0
        self.t += 1
        return self._draw(), reward, self.t >= 10, False, {}


def test_custom_env_class_trains_from_a_factory_and_stops_at_a_reward_threshold(tmp_path: Path):
    result = shell.train(env=MatchSign, run_dir=tmp_path / "run", progress=False,
                         overrides={"env.num_envs": 4, "ppo.num_steps": 32, "ppo.num_minibatches": 2,
                                    "run.eval_every": 1, "run.eval_episodes": 10, "run.total_timesteps": 50_000},
                         callbacks=[shell.StopOnReward(9.5)])
    summary = result.summary
    assert summary["stopped_early"] is True
    assert summary["env_steps"] < 50_000  # the stop came before the budget
    assert summary["eval_return_mean"] >= 9.5
    assert result.run_dir == tmp_path / "run" and json.loads((result.run_dir / "summary.json").read_text()) == summary
    # the handle's policy acts on the env it was trained on
    env = MatchSign()
    obs, _ = env.reset(seed=123)
    total = 0.0
    for _ in range(10):
        obs, reward, *_ = env.step(result.policy.act(obs, deterministic=True))
        total += reward
    assert total >= 9.0
    assert isinstance(result.policy, shell.Policy)


def test_factory_runs_refuse_cli_eval_and_resume_with_one_line(tmp_path: Path, main):
    run = tmp_path / "run"
    shell.train(env=MatchSign, run_dir=run, progress=False,
                overrides={"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 1,
                           "run.total_timesteps": 32, "run.eval_episodes": 2})
    for args in (["eval", str(run)], ["--resume", str(run), "--total-timesteps", "64"]):
        proc = main(*args)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and "from Python" in lines[0] and "env=" in lines[0], lines
    # from Python, with the factory again, both work
    assert shell.evaluate(run, env=MatchSign, episodes=2)["eval_episodes"] == 2
    more = shell.resume(run, 64, env=MatchSign, progress=False)
    assert more.summary["env_steps"] == 64
    policy = shell.load_policy(run, env=MatchSign)
    assert policy(np.array([1.0], np.float32)) in (0, 1)


def test_the_api_leaves_the_callers_process_alone(tmp_path: Path, capfd):
    torch.set_num_threads(2)
    torch.manual_seed(1234)
    expected = torch.rand(3)
    torch.manual_seed(1234)
    handlers = (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM))
    shell.train("cartpole", run_dir=tmp_path / "run", total_timesteps=512, progress=False,
                overrides={"run.eval_episodes": 2})
    assert torch.get_num_threads() == 2
    assert torch.equal(torch.rand(3), expected)  # the global RNG stream is where the caller left it
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers
    assert capfd.readouterr().out == ""


def test_bad_input_raises_instead_of_exiting(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"overrides key 'ppo\.gama': unknown key ppo\.gama; did you mean 'gamma'"):
        shell.train(overrides={"ppo.gama": 0.9}, run_dir=tmp_path / "a", progress=False)
    with pytest.raises(ConfigError, match=r"run\.eval_every"):
        shell.train(env=MatchSign, callbacks=[shell.StopOnReward(1.0)], run_dir=tmp_path / "b", progress=False)
    disabled = gym.make_vec("CartPole-v1", 2, vectorization_mode="sync",
                            vector_kwargs={"autoreset_mode": AutoresetMode.DISABLED})
    with pytest.raises(ConfigError, match="DISABLED"):
        shell.train(env=disabled, run_dir=tmp_path / "c", progress=False)
    assert not (tmp_path / "a").exists() and not (tmp_path / "c").exists()
    with pytest.raises(ConfigError, match="Callable"):
        shell.train(env=42, run_dir=tmp_path / "d", progress=False)


def test_a_callback_sees_every_metrics_row_and_its_exception_propagates(tmp_path: Path):
    rows = []

    def record(row):
        rows.append(row)
        if len(rows) == 3:
            raise KeyError("stop from the callback")

    with pytest.raises(KeyError, match="stop from the callback"):
        shell.train("cartpole", run_dir=tmp_path / "run", total_timesteps=16 * 128 * 5, callbacks=[record],
                    progress=False)
    assert [r["update"] for r in rows] == [1, 2, 3]
    header, *lines = (tmp_path / "run" / "metrics.csv").read_text().splitlines()
    assert len(lines) == 3 and set(rows[0]) == set(header.split(","))


# ----------------------------------------------------------------------------- NEXT_STEP sources
def counting_vec(num_envs: int = 3) -> gym.vector.VectorEnv:
    return gym.vector.SyncVectorEnv([lambda: gym.make("Counting-v0")] * num_envs,
                                    autoreset_mode=AutoresetMode.NEXT_STEP)


@pytest.mark.parametrize("recurrent", ["none", "gru"])
def test_no_dummy_step_of_a_next_step_env_enters_the_batch(tmp_path: Path, recurrent: str):
    """Counting-v0: the k-th step of an episode pays k; episodes of 3, 5 (terminated) and 7 (truncated)
    steps. In NEXT_STEP mode the step after an end is a dummy whose input is the final observation
    (t = episode length): none may reach GAE, the losses, the normalisers or the statistics."""
    cfg = config_from_dict({
        "env": {"id": "Counting-v0", "num_envs": 3, "normalize_obs": True, "normalize_reward": True},
        "policy": {"recurrent": recurrent, "seq_len": 8},
        "ppo": {"num_steps": 24, "num_minibatches": 3, "gamma": 0.5},
        "run": {"eval_episodes": 0}})
    trainer = Trainer(cfg, tmp_path, env_source=counting_vec(), source_kind="vector_env")
    assert trainer.env.env.next_step
    raw_obs = []
    update_and_normalize = trainer.agent.obs_normalizer.update_and_normalize

    def spy(obs, valid):  # the rollout's own observations (not the bootstrap's final ones)
        raw_obs.append(obs.clone())
        return update_and_normalize(obs, valid)

    trainer.agent.obs_normalizer.update_and_normalize = spy
    obs = trainer.env.reset(seed=0)
    obs, episodes = trainer.collect(obs)
    st = trainer.lanes.only.storage
    seen = torch.stack(raw_obs)  # [T, N, 2]: (phase, t) as the env returned them
    phase, t = seen[..., 0].long(), seen[..., 1]
    lengths = torch.tensor(COUNTING_LENGTHS)[phase]
    dummy = t >= lengths  # the input of a dummy step is the final observation of the ended episode
    assert dummy.any() and (~dummy).any()
    assert torch.equal(st.valid, ~dummy)
    # the normalisers counted only real steps
    real = int((~dummy).sum())
    assert int(trainer.agent.obs_normalizer.moments.count) == real
    assert int(trainer.lanes.only.reward_scaler.moments.count) == real
    # episode statistics: whole episodes, the dummy not counted
    count, return_sum, length_sum = episodes[None].tolist()
    ended = lengths[st.dones]  # the length of each episode that ended in this rollout
    assert st.dones[dummy].sum() == 0 and count == len(ended) >= 3
    assert length_sum == ended.sum() and return_sum == (ended * (ended + 1) / 2).sum()
    # no minibatch holds a dummy step: every step seen in the update is a real one
    if recurrent == "none":
        for mb in st.minibatches(3):
            obs_mb = mb["obs"]
            assert len(obs_mb) == real // 3
    else:
        total = 0
        for mb in st.sequence_minibatches(3, 8):
            total += int(mb["valid"].sum())
        assert total == real
    trainer.lanes.only.ppo.update(st)  # runs on the real steps only
    trainer.env.close()


def test_episode_statistics_of_a_next_step_env_are_whole_episodes(tmp_path: Path):
    cfg = config_from_dict({"env": {"id": "Counting-v0", "num_envs": 1},
                            "ppo": {"num_steps": 40, "num_minibatches": 1}, "run": {"eval_episodes": 0}})
    trainer = Trainer(cfg, tmp_path, env_source=counting_vec(1), source_kind="vector_env")
    trainer.env.reset(seed=0)  # phase 0: lengths cycle 3, 5, 7, 3, ...
    lengths, returns = [], []
    for _ in range(40):
        step = trainer.env.step({None: torch.zeros(1, dtype=torch.long)})[None]
        if step.episode_done is not None and bool(step.episode_done[0]):
            lengths.append(int(step.episode_length[0]))
            returns.append(float(step.episode_return[0]))
    assert lengths[:6] == [3, 5, COUNTING_LIMIT, 3, 5, COUNTING_LIMIT]
    assert returns[:3] == [6.0, 15.0, 28.0]
    trainer.env.close()


def test_cartpole_from_a_ready_next_step_vector_env_matches_the_config_path(tmp_path: Path):
    vec = gym.make_vec("CartPole-v1", 16, vectorization_mode="sync")  # gymnasium's default: NEXT_STEP
    assert vec.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    ready = shell.train("cartpole", env=vec, run_dir=tmp_path / "ready", progress=False).summary
    config_path = shell.train("cartpole", run_dir=tmp_path / "config", progress=False).summary
    assert config_path["eval_return_mean"] >= 475
    assert ready["eval_return_mean"] >= 475, ready


# ----------------------------------------------------------------------------- the env's own time limit
def match_sign_limited():
    """A factory whose env carries its own TimeLimit, as the README's make_corridor."""
    return gym.wrappers.TimeLimit(MatchSign(), max_episode_steps=5)


@pytest.mark.parametrize("mode", ["sync", "async", "threads"])
def test_a_factorys_time_limit_is_the_evaluation_cap(tmp_path: Path, mode: str):
    summary = shell.train(env=match_sign_limited, run_dir=tmp_path / "run", progress=False,
                          overrides={"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 1,
                                     "run.total_timesteps": 32, "run.eval_episodes": 3,
                                     "env.vectorization_mode": mode}).summary
    # not the 10,000 of an env without one: each episode is cut at 5 by the env's TimeLimit
    assert summary["eval_max_episode_steps"] == 5 and summary["eval_truncated_episodes"] == 3


def test_a_ready_vector_envs_and_an_id_paths_time_limits_are_read_from_the_sub_envs(tmp_path: Path):
    from shell.envs import make_env

    cfg = config_from_dict({}).env
    cpu = torch.device("cpu")
    for vec, limit in [(gym.vector.SyncVectorEnv([match_sign_limited] * 2), 5),
                       (gym.vector.AsyncVectorEnv([match_sign_limited] * 2), 5),
                       (gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 2), 500),  # the sub-envs' spec
                       (gym.vector.AsyncVectorEnv([MatchSign] * 2), None)]:  # no limit at all
        assert vec.spec is None  # nothing to read on the vector env itself
        env = make_env(cfg, cpu, source=vec)
        assert env.max_episode_steps == limit
        env.reset(seed=0)  # an async env's workers are still alive after the question
        env.close()
    # an id registered without a limit, given one by a TimeLimit in env.wrappers
    wrapped = config_from_dict({"env": {"id": "NeverEnding-v0", "num_envs": 2, "wrappers": [
        {"class": "gymnasium.wrappers:TimeLimit", "kwargs": {"max_episode_steps": 7}}]}}).env
    for env_cfg, limit in [(wrapped, 7), (attrs.evolve(wrapped, wrappers=[]), None)]:
        env = make_env(env_cfg, cpu)
        assert env.max_episode_steps == limit
        env.close()
    # a ready vector env trained with an eval_env factory: the summary's cap is that env's limit
    summary = shell.train(env=gym.vector.SyncVectorEnv([match_sign_limited] * 2), eval_env=match_sign_limited,
                          run_dir=tmp_path / "ready", progress=False,
                          overrides={"ppo.num_steps": 16, "ppo.num_minibatches": 1, "run.total_timesteps": 32,
                                     "run.eval_episodes": 2}).summary
    assert summary["eval_max_episode_steps"] == 5 and summary["eval_truncated_episodes"] == 2


# ----------------------------------------------------------------------------- an env that raises, named
def faulty_physics():
    from tests.integration.custom_envs import FaultyEnv

    return FaultyEnv(fail_at=1)


def test_an_env_that_raises_is_named_by_its_factory_or_vector_env(tmp_path: Path):
    """Not "env env": a factory's env by the factory's name (a partial's function's), a ready vector env without
    a spec id by its type."""
    from functools import partial

    from shell.errors import TrainingError
    from tests.integration.custom_envs import FaultyEnv

    overrides = {"env.num_envs": 2, "ppo.num_steps": 8, "ppo.num_minibatches": 1, "run.total_timesteps": 16,
                 "run.eval_episodes": 0, "run.loggers": []}
    for source, name in [(faulty_physics, "faulty_physics"), (partial(FaultyEnv, fail_at=1), "FaultyEnv"),
                         (gym.vector.SyncVectorEnv([faulty_physics] * 2,
                                                   autoreset_mode=AutoresetMode.SAME_STEP), "SyncVectorEnv")]:
        with pytest.raises(TrainingError, match=f"^env {name} raised RuntimeError: simulated physics blow-up"):
            shell.train(env=source, overrides=overrides, run_dir=tmp_path / name, progress=False)


# ----------------------------------------------------------------------------- eval and play from Python
DUEL = {"env.backend": "pettingzoo", "env.num_envs": 2, "ppo.num_steps": 10, "ppo.num_minibatches": 2,
        "ppo.update_epochs": 1, "policy.hidden_sizes": [16], "run.eval_episodes": 2, "run.total_timesteps": 20,
        "run.loggers": []}


def test_a_game_trained_from_a_factory_is_evaluated_and_played_from_python(tmp_path: Path, main):
    """``ppo-core eval`` and ``play`` cannot rebuild a game made by a factory: they name the Python calls, which take
    the factory again (issue 64)."""
    pytest.importorskip("pettingzoo")
    import io

    from tests.integration.turn_games import PlayableDuel

    run = tmp_path / "duel"
    shell.train(env=PlayableDuel, run_dir=run, progress=False, overrides=DUEL)
    for command, verb, call in (("eval", "evaluate", "shell.evaluate"), ("play", "play", "shell.play")):
        proc = main(command, str(run))
        assert proc.returncode == 2, proc.stderr
        (line,) = proc.stderr.strip().splitlines()
        assert f"{verb} it from Python" in line and f"{call}({str(run)!r}, env=<" in line, line
    with pytest.raises(ConfigError, match=r"shell\.evaluate\(.*env=<env factory>\)"):
        shell.evaluate(run)
    with pytest.raises(ConfigError, match=r"shell\.play\(.*env=<game factory>\)"):
        shell.play(run, stdin=io.StringIO(""))
    # the evaluation: seat_0 moves last and wins whatever is played (turn_games.Duel)
    result = shell.evaluate(run, env=PlayableDuel, episodes=4)
    assert result["eval_vs"]["random"]["seat_0"] == {"win": 1.0, "draw": 0.0, "loss": 0.0, "games": 2,
                                                      "distinct": 2}
    assert result["eval_episodes"] == 4 and json.loads((run / "checkpoints" / "eval.json").read_text()) == result
    # a game in seat_1, the moves from a stream: "7" is refused, then 1 and 2; seat_1 collects 1 before its first
    # move, 0.5 + 3 by its second and 0.5 + 5 - 100 at the end (turn_games.Duel)
    lines: list[str] = []
    outcome = shell.play(run, env=PlayableDuel, seat="seat_1", stdin=io.StringIO("7\n1\n2\n"), out=lines.append)
    assert outcome == {"seat": "seat_1", "score": 1 + 0.5 + 3 + 0.5 + 5 - 100, "result": "loss", "moves": 5}
    assert lines[0].startswith("seat_0 (agent) plays ") and "illegal move '7'; legal moves: [0, 1, 2]" in lines
    assert json.loads(lines[-1]) == outcome
    unfinished = shell.play(run, env=PlayableDuel, seat="seat_1", stdin=io.StringIO(""), out=lambda line: None)
    assert unfinished["result"] == "unfinished" and unfinished["moves"] == 1
    with pytest.raises(ConfigError, match="not a turn-based game"):
        shell.play(run, env=MatchSign, stdin=io.StringIO(""))
    # a seat by its index: an int as the docstring says, or its digits; one out of range is refused in one line
    by_index = shell.play(run, env=PlayableDuel, seat=1, stdin=io.StringIO("1\n2\n"), out=lambda line: None)
    assert by_index == outcome
    for seat in (5, -1, "5"):
        with pytest.raises(ConfigError, match=r"^seat=.* is not a seat of this game"):
            shell.play(run, env=PlayableDuel, seat=seat, stdin=io.StringIO(""))



# ----------------------------------------------------------------------------- messages in each front end's words
TINY = {"env.num_envs": 2, "ppo.num_steps": 16, "ppo.num_minibatches": 1, "ppo.update_epochs": 1,
        "run.eval_episodes": 0, "run.loggers": []}
FLAG = re.compile(r"(?<![\w-])--[a-z]")


def python_message(call, *args, **kwargs) -> str:
    """The message of the ConfigError that ``call(*args, **kwargs)`` raises, checked to name no CLI flag."""
    with pytest.raises(ConfigError) as info:
        call(*args, **kwargs)
    message = str(info.value)
    assert not FLAG.search(message), message
    return message


def test_errors_of_the_python_api_name_its_arguments_not_the_clis_flags(tmp_path: Path, monkeypatch, capfd):
    """``shell.train(run_dir=...)`` into a folder that is not empty was told ``--run-dir ... use --resume ...``
    (issue 64): every message the API gives names the Python argument or call instead (``shell.errors.WORDS``);
    the CLI's keep their flags (tests/integration/test_cli.py)."""
    import io
    import sys

    from shell.config import load_config
    from shell.envs.envpool import _check_envpool_options
    from shell.export import export_lanes, export_policy
    from shell.stop import StopRequest
    from shell.tracking.base import RunStart
    from shell.tracking.worker import QueuedTracker, TrackerBackend

    run = tmp_path / "run"
    shell.train("cartpole", run_dir=run, total_timesteps=64, progress=False, overrides=TINY)
    # train and resume
    assert python_message(shell.train, "cartpole", run_dir=run, progress=False) == (
        f"run_dir={str(run)!r} exists and is not empty; continue it with shell.resume({str(run)!r}), or pick a new "
        "folder")
    missing = str(tmp_path / "none")
    assert python_message(shell.resume, missing) == f"shell.resume({missing!r}): no such run dir"
    (tmp_path / "empty" / "checkpoints").mkdir(parents=True)
    assert "; train it again with shell.train into a new or empty run dir" in python_message(shell.resume,
                                                                                               tmp_path / "empty")
    assert python_message(shell.resume, run, 16, progress=False).endswith("(2 updates); total_timesteps=16 is fewer")
    capfd.readouterr()
    shell.resume(run)  # a finished run: one line on stderr says how to train it further
    assert capfd.readouterr().err.strip().endswith("to train it further, add total_timesteps=N with N > 64")
    stop = StopRequest()  # a stop request (the CLI's on a signal): the line says how to continue
    shell.train("cartpole", run_dir=tmp_path / "stopped", total_timesteps=128, overrides=TINY, progress=False,
                stop=stop, callbacks=[lambda row: stop.request(signal.SIGINT)])
    assert f"continue with shell.resume({str(tmp_path / 'stopped')!r})" in capfd.readouterr().err
    # overrides written as the CLI's section.key=value texts, and config names
    assert python_message(shell.train, overrides=["ppo.gamma"], run_dir=tmp_path / "o", progress=False) == (
        "overrides entry 'ppo.gamma': expected section.key=value, e.g. 'ppo.gamma=0.99'")
    assert python_message(load_config, "cartpole", ["ppo.gama=0.9"]).startswith(
        "overrides entry 'ppo.gama=0.9': unknown key ppo.gama")
    hinted = python_message(load_config, "cartpole", ["policy.hidden_sizes=64,64"])
    assert hinted.endswith("; write it as TOML: 'policy.hidden_sizes=[64, 64]'")
    load_config("cartpole", [hinted.rsplit(": ", 1)[1].strip("'")])  # what the hint says to write is accepted
    assert python_message(load_config, "no-such-config").endswith(
        "list them with: shell.config.shipped_configs()")
    assert python_message(_check_envpool_options, {"seed": 1}, 2).endswith("drop it and pass seed=N")
    # evaluate and export
    assert python_message(shell.evaluate, run, episodes=2, video=True, video_episodes=3).startswith(
        "video_episodes=3 must be from 1 to episodes (2)")
    with monkeypatch.context() as patch:
        patch.setitem(sys.modules, "moviepy", None)  # not installed: its import raises ImportError
        assert python_message(shell.evaluate, run, video=True).startswith("video=True needs moviepy; run: pip ")
    with monkeypatch.context() as patch:
        patch.setattr(shell.export, "ONNX_PACKAGES", ("no_such_module_xyz",))
        assert python_message(export_policy, run, "onnx").startswith("format='onnx' needs no_such_module_xyz; run:")
    assert python_message(export_policy, run, "pt2", tmp_path) == (
        f"out={str(tmp_path)!r} is a folder; name the file to write")
    # a game: a run of two seats of different spaces (a policy each), and a seat it does not have
    pytest.importorskip("pettingzoo")
    game = tmp_path / "lopsided"
    shell.train(overrides={**DUEL, "env.id": "tests.integration.turn_games:lopsided"}, run_dir=game, progress=False)
    assert python_message(export_lanes, game, "pt2", tmp_path / "one.pt2").startswith("out names one file; ")
    assert python_message(shell.play, game, seat="seat_9", stdin=io.StringIO("")).startswith(
        "seat='seat_9' is not a seat of this game")

    class Unreachable(TrackerBackend):  # a tracker that fails: one warning line, and the run goes on
        name = "unreachable"

        def open(self, start):
            raise ConnectionError("no server")

    QueuedTracker(Unreachable(), RunStart(tmp_path, {})).close()
    warning = capfd.readouterr().err
    assert "shell.resume sends the checkpointed rows it lacks" in warning and not FLAG.search(warning)


def test_no_message_below_the_cli_names_a_flag():
    """What the library raises, prints or warns says no ``--flag`` of its own: it says ``said(name, value)``
    (shell/errors.py), which the CLI turns into its flag. ``shell.tune`` is the CLI's search (its messages name
    ``--storage``, ``--study``); shell/cli.py is the CLI."""
    import ast

    found = []
    for path in sorted((ROOT / "shell").rglob("*.py")):
        name = path.relative_to(ROOT / "shell").as_posix()
        if name == "cli.py" or name.startswith("tune/"):
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            call = node.exc if isinstance(node, ast.Raise) else node
            if not isinstance(call, ast.Call):
                continue
            callee = getattr(call.func, "id", getattr(call.func, "attr", None))
            if not isinstance(node, ast.Raise) and callee not in ("print", "warn", "write"):
                continue
            found += [f"{name}:{part.lineno}: {part.value}" for arg in call.args for part in ast.walk(arg)
                      if isinstance(part, ast.Constant) and isinstance(part.value, str) and FLAG.search(part.value)]
    assert found == []


def test_a_vmas_video_without_a_display_is_refused_in_pythons_words(tmp_path: Path, monkeypatch):
    pytest.importorskip("vmas")
    import shell.envs.vmas

    run = tmp_path / "run"
    shell.train(run_dir=run, progress=False, overrides={
        "env.backend": "vmas", "env.id": "balance", "env.kwargs": {"n_agents": 2}, "env.num_envs": 2,
        "env.max_episode_steps": 5, "ppo.num_steps": 5, "ppo.num_minibatches": 1, "ppo.update_epochs": 1,
        "policy.hidden_sizes": [8], "run.eval_episodes": 0, "run.total_timesteps": 10, "run.loggers": []})
    monkeypatch.delenv("DISPLAY", raising=False)
    monkeypatch.setattr(shell.envs.vmas.shutil, "which", lambda name: None)
    assert python_message(shell.evaluate, run, episodes=1, video=True).startswith(
        "rendering env.backend = 'vmas' (video=True) needs an X display")
