"""Generated turn-based games (PettingZoo AEC envs, tests/fuzz/fuzz_turns.py) through ``shell.train`` (from
``env.id`` or from a factory, as a user's own game is given), the periodic and final evaluation against random
moves and a bot, ``load_policy`` playing a fresh game through the AEC API, ``shell.evaluate`` (and ``eval``'s
refusal of a factory's run without its factory), ``shell.play`` from a script of moves, export and ``shell.resume``
(tests/fuzz/outcomes.py).

Each case is a game (two or three seats, their spaces, masks that change at every move, games that end on any
seat's move, a seat that leaves early, rewards at the end or at every move, now and then a fault) and a tiny run
(one or two updates; now and then a self-play pool, random or bot opponents, random openings, a recurrent policy,
a move limit). What the docs refuse must be refused at start-up (exit 2, one short line); an env's own fault may
end training (exit 1, one line, the last checkpoint kept) and a planned ``raise`` the run reaches must; everything
else trains, with finite metrics and checkpoints, and a policy that only ever plays legal moves (the game raises
FuzzIllegalAction on any other, also on a move of ``play`` or of an opponent).

Cases that meet a bug found here and still open are discarded (:func:`known_bug`); each such bug has a strict xfail
test at the end of this module, which fails once the bug is fixed, so that its case comes back.
"""

from __future__ import annotations

import io
import json
import math
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

import shell
from shell.errors import ConfigError, TrainingError
from shell.evaluation import eval_checkpoint
from shell.export import export_lanes
from tests.fuzz.expect import EXTREME, magnitude
from tests.fuzz.fuzz_envs import MASK_KEY
from tests.fuzz.fuzz_turns import FuzzGame
from tests.fuzz.outcomes import (
    MAX_LINE,
    PREFIX,
    TALLY,
    check_checkpoints_finite,
    check_exit,
    check_metrics_finite,
    check_resume,
    classify,
)
from tests.fuzz.profile import CASE_SECONDS, fuzz_settings
from tests.fuzz.strategies import action_refusals, game_run, game_spec, obs_refusals

GAME_ID = "tests.fuzz.fuzz_turns"


def mask_source(spec: dict[str, Any], setting: str) -> str | None:
    """Where the run reads the game's masks: "obs", "info" or None (the setting is met: see :func:`allowed`)."""
    if setting == "none" or spec["mask"] is None:
        return None
    return spec["mask"]


def own_view(seat: dict[str, Any], spec: dict[str, Any], setting: str) -> dict[str, Any]:
    """The space spec of a seat's observation as the policy sees it: a mask key read as the mask is left out (a
    Dict of the rest: ``"observation"`` or the seat's own keys), one not read stays an input."""
    own = seat["obs"]
    if spec["mask"] != "obs":
        return own
    parts = dict(own["spaces"]) if own["type"] == "dict" else {"observation": own}
    if mask_source(spec, setting) != "obs":
        parts[MASK_KEY] = {"type": "multibinary", "n": 2}  # any flat part: it stays an input
    return {"type": "dict", "spaces": parts}


def flat_box(space: dict[str, Any]) -> bool:
    return space["type"] == "box" and len(space["shape"]) == 1


def groups(spec: dict[str, Any]) -> int:
    """How many groups (policies) the seats form: one per set of equal spaces (shell/envs/groups.py)."""
    game = FuzzGame(spec)
    return len({(repr(game.observation_space(a)), repr(game.action_space(a))) for a in game.possible_agents})


def selfplay_refusals(spec: dict[str, Any], run: dict[str, Any]) -> list[str]:
    """Why ``[selfplay]`` is refused (shell/games/pool.py: check_selfplay): seats of different spaces, a recurrent
    policy, random moves (random_prob, bot_prob, opening_moves) on moves that are not one Discrete choice."""
    uniform = any(run.get(k, 0) for k in ("selfplay.random_prob", "selfplay.opening_moves", "selfplay.bot_prob"))
    if not (uniform or run.get("selfplay.snapshot_every", 0)):
        return []
    out = []
    if groups(spec) > 1:
        out.append("[selfplay] on seats of different spaces")
    if run["policy.recurrent"] != "none":
        out.append("[selfplay] with a recurrent policy")
    if uniform and spec["seats"][0]["act"]["type"] != "discrete":
        out.append("random moves that are not one Discrete choice")
    return out


def refusals(spec: dict[str, Any], run: dict[str, Any], setting: str) -> list[str]:
    """Every documented reason a game case is refused at start-up (empty: it must train)."""
    out = []
    for seat in spec["seats"]:
        out += obs_refusals(seat["obs"]) + action_refusals(seat["act"])
    if setting == "method":
        out.append("env.action_mask = 'method' on PettingZoo")
    elif setting in ("obs", "info") and spec["mask"] != setting:
        out.append(f"env.action_mask = {setting!r} finds no mask")
    if run["policy.critic"] == "state":
        out.append("policy.critic = 'state' on a game without state()")
    for seat in spec["seats"]:
        view = own_view(seat, spec, setting)
        if run["policy.agent_id"] and not (flat_box(view) or view["type"] == "dict"):
            out.append("policy.agent_id on neither a 1-D Box nor a Dict")
        if run["policy.critic"] == "concat" and not flat_box(view):
            out.append("policy.critic = 'concat' on observations that are not 1-D Boxes")
    if any(seat["act"]["type"] != "discrete" for seat in spec["seats"]):  # no opponent plays it (Ratings.serves)
        if run.get("run.eval_opponents", ["random"]) != ["random"]:
            out.append("run.eval_opponents bots on a game whose moves are not one Discrete choice")
        if run.get("run.eval_opening_moves", 0):
            out.append("run.eval_opening_moves on a game whose moves are not one Discrete choice")
    return out + selfplay_refusals(spec, run)


def known_bug(spec: dict[str, Any], run: dict[str, Any], setting: str, evaluate: bool,
              play: bool = False) -> str | None:
    """A reported bug of the library that a case would meet (the case is discarded, not passed, until it is fixed;
    each has a strict xfail test below that passes once it is). None open."""
    return None


def moves_per_copy(run: dict[str, Any]) -> int:
    """The moves each copy makes at least in training (one per step; opponents and openings make more)."""
    return run["run.total_timesteps"] // run["env.num_envs"]


def allowed(spec: dict[str, Any], run: dict[str, Any], setting: str) -> set[int]:
    """The exit codes a case may end with: 2 alone for a documented refusal; 1 for a fault (a planned ``raise``
    that training reaches: 1 alone; a fault of the first reset may be found at start-up: 2), or for observations so
    large that float32 losses overflow (tests/fuzz/expect.py)."""
    if refusals(spec, run, setting):
        return {2}
    fault = spec["fault"]
    extreme = max(magnitude({"obs": seat["obs"], "obs_scale": 1.0}) for seat in spec["seats"]) >= EXTREME
    if fault is None:
        return {0, 1} if extreme else {0}
    if fault["kind"] == "raise" and 1 <= fault["at"] <= moves_per_copy(run):
        return {1}
    return {0, 1, 2} if fault["at"] == 0 else {0, 1}


def play(policy: Any, spec: dict[str, Any], setting: str, moves: int = 16) -> None:
    """Play a fresh game with the loaded policy in every seat, through the AEC API as a user does (the game refuses
    a move outside its space or against its mask, also one of a seat whose turn it is not)."""
    game = FuzzGame({**spec, "fault": None, "enforce_mask": mask_source(spec, setting) is not None})
    source = mask_source(spec, setting)
    played, seed = 0, 1
    while played < moves:
        game.reset(seed=seed)
        policy.reset()
        for agent in game.agent_iter(max_iter=4 * moves):
            obs, _, terminated, truncated, info = game.last()
            if terminated or truncated:
                game.step(None)
                continue
            mask = {agent: info[MASK_KEY].astype(bool)} if source == "info" else None
            move = policy({agent: obs}, action_mask=mask)[agent]
            game.step(move)
            played += 1
        seed += 1


def one_line(exc: Exception, run_dir: Path) -> None:
    """A refusal or failure after training: one line of at most :data:`MAX_LINE` characters (the user's own run dir,
    quoted, not counted)."""
    line = PREFIX + str(exc).replace(str(run_dir), "RUN")
    assert "\n" not in line and "Traceback" not in line and len(line) <= MAX_LINE, line


def check_eval(run_dir: Path, source: str, factory: Any, fault: bool) -> None:
    """``shell.evaluate`` plays the run again against its opponents (a factory's run from its factory; the game's
    own fault: one line); ``eval`` of a factory's run without it is refused in one line (its config cannot rebuild
    the game)."""
    try:
        result = shell.evaluate(run_dir, env=factory if source == "factory" else None, episodes=2)
    except TrainingError as exc:
        assert fault, f"evaluate: {exc}"
        one_line(exc, run_dir)
    else:
        assert math.isfinite(result["eval_return_mean"]), result
    if source == "factory":
        try:
            eval_checkpoint(run_dir, episodes=2)
        except ConfigError as exc:
            one_line(exc, run_dir)
        else:
            raise AssertionError("eval of a factory's run must be refused: its config cannot rebuild the game")


def check_play(run_dir: Path, source: str, factory: Any, fault: bool, seat: str | None, lines: list[str]) -> None:
    """``shell.play``: a game against the agent from a script of moves (illegal and unreadable ones are asked
    again; the script may end first): a result with a finite score, a refusal in one line, or (the game's own
    fault) a failure in one line; never a traceback, and the game never gets an illegal move (it raises
    FuzzIllegalAction, which fails the case)."""
    printed: list[str] = []
    try:
        result = shell.play(run_dir, env=factory if source == "factory" else None, seat=seat,
                            stdin=io.StringIO("".join(line + "\n" for line in lines)), out=printed.append, seed=3)
    except ConfigError as exc:
        one_line(exc, run_dir)
        return
    except TrainingError as exc:
        assert fault, f"play: {exc}"
        one_line(exc, run_dir)
        return
    assert result["result"] in ("win", "draw", "loss", "unfinished"), result
    assert math.isfinite(result["score"]) and json.loads(printed[-1]) == result, (result, printed[-1:])


def check_case(spec: dict[str, Any], run: dict[str, Any], setting: str, source: str, export: str | None,
               evaluate: bool, play_script: tuple[str | None, list[str]] | None = None, resume: bool = False,
               label: str = "generated turn-based game") -> int:
    """Run one case and check its outcome (the module docstring); its exit code (tallied under ``label``)."""
    game = {**spec, "enforce_mask": setting != "none"}
    overrides = {**run, "env.action_mask": setting}
    if source == "id":
        overrides.update({"env.id": GAME_ID, "env.kwargs": {"spec": json.dumps(game)}})

    def factory() -> FuzzGame:
        return FuzzGame(game)

    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(tmp) / "run"
        outcome = classify(lambda: shell.train(env=factory if source == "factory" else None, overrides=overrides,
                                               run_dir=run_dir, progress=False), CASE_SECONDS, "the case")
        TALLY[label, outcome.code] += 1
        codes = allowed(spec, run, setting)
        if check_exit(outcome, codes, run_dir):
            check_metrics_finite(run_dir, outcome.result.summary)
            check_checkpoints_finite(run_dir)
            play(shell.load_policy(run_dir), spec, setting)
            if evaluate:
                check_eval(run_dir, source, factory, spec["fault"] is not None)
            if play_script is not None:
                check_play(run_dir, source, factory, spec["fault"] is not None, *play_script)
            if export is not None:
                for result in export_lanes(run_dir, export).values():
                    assert result.path.is_file() and np.isfinite(result.max_abs_diff)
            if resume:
                check_resume(run_dir, run, codes, factory if source == "factory" else None)
        return outcome.code


@fuzz_settings(ci=100, long=2500)
@given(spec=game_spec(), run=game_run(), data=st.data())
def test_a_generated_turn_based_game_trains_or_is_refused_in_one_line(spec, run, data):
    options = ["auto"] * 8 + ["none"] + [spec["mask"] or "auto"] * 2 + ["obs", "info", "method"]
    setting = data.draw(st.sampled_from(options), label="env.action_mask")
    source = data.draw(st.sampled_from(["id", "factory"]), label="source")
    export = data.draw(st.sampled_from([None] * 9 + ["pt2", "onnx"]), label="export")
    evaluate = data.draw(st.sampled_from([False, False, True]), label="eval")
    play_script = data.draw(st.sampled_from([None, None, None, "play"]).flatmap(
        lambda kind: st.none() if kind is None else st.tuples(
            st.sampled_from([None, "seat_0", "seat_1", "1", "seat_9"]),
            st.lists(st.sampled_from(["0", "1", "2", "3", "-1", "7", "x", "", " 1 "]), max_size=10))),
        label="play")
    resume = data.draw(st.sampled_from([False] * 4 + [True]), label="resume")
    assume(known_bug(spec, run, setting, evaluate, play_script is not None) is None)
    check_case(spec, run, setting, source, export, evaluate, play_script, resume)


# ----------------------------------------------------------------------------- bugs found, fixed
# Each was a case the generated test discarded (known_bug) while the bug was open, held by a strict xfail; now fixed,
# its case is generated again and its test guards the fix. A new bug: its case in known_bug, its test here
# under @pytest.mark.xfail(strict=True, reason="open bug: ..."), named test_open_bug_...
BOX = {"type": "box", "shape": [3], "dtype": "float32", "low": -1.0, "high": 1.0}
GAME = {"seats": [{"obs": BOX, "act": {"type": "discrete", "n": 3, "start": 0}}] * 2, "mask": "obs",
        "mask_dtype": "int8", "waiting": "zeros", "one_legal": 0.0, "order": "cycle", "games": [[5, "terminated", 0]],
        "rewards": "end", "reward_scale": 1.0, "leave": None, "fault": None, "seed": 0}
RUN = {"env.backend": "pettingzoo", "env.num_envs": 2, "ppo.num_steps": 8, "ppo.num_minibatches": 1,
       "ppo.update_epochs": 1, "policy.hidden_sizes": [8], "policy.recurrent": "none", "policy.agent_id": False,
       "policy.critic": "local", "run.total_timesteps": 16, "run.eval_episodes": 2, "run.eval_every": 0,
       "run.eval_max_episode_steps": 30, "run.checkpoint_every": 1, "run.seed": 0, "run.device": "cpu",
       "run.loggers": []}


@pytest.mark.parametrize("sets", [{}, {"run.eval_episodes": 0, "selfplay.random_prob": 1.0}, {"run.eval_episodes": 0}])
def test_fixed_bug_random_moves_of_a_game_of_discrete_moves_with_a_start_are_moves_of_its_space(sets):
    spec = {**GAME, "seats": [{"obs": BOX, "act": {"type": "discrete", "n": 3, "start": -3}}] * 2}
    run = {**RUN, **sets}
    play = None if sets != {"run.eval_episodes": 0} else (None, ["0", "-3", "-2", "-1"] * 4)  # 0: not a move
    check_case(spec, run, "auto", "factory", None, False, play, label="fixed bug")


def test_fixed_bug_the_selfplay_refusal_of_seats_of_different_spaces_is_one_short_line():
    spec = {**GAME, "seats": [GAME["seats"][0], {"obs": {**BOX, "shape": [2]}, "act": GAME["seats"][0]["act"]}]}
    run = {**RUN, "selfplay.snapshot_every": 1}
    check_case(spec, run, "auto", "factory", None, False, label="fixed bug")


def test_fixed_bug_auto_finds_the_masks_a_game_gives_in_the_info_of_the_seat_to_move_only():
    spec = {**GAME, "mask": "info", "waiting": "absent", "seed": 2}  # seat_1 moves first in a copy
    check_case(spec, RUN, "auto", "factory", None, False, label="fixed bug")


def test_fixed_bug_play_shows_a_dict_observation_without_an_observation_key():
    spec = {**GAME, "seats": [{"obs": {"type": "dict", "spaces": {"board": BOX}}, "act": GAME["seats"][0]["act"]}] * 2}
    run = {**RUN, "run.eval_episodes": 0}
    check_case(spec, run, "auto", "factory", None, False, (None, ["0", "1", "2"]), label="fixed bug")


@pytest.mark.parametrize("act", [{"type": "multidiscrete", "nvec": [3, 2], "start": [0, 0]}, {"type": "multibinary",
                                                                                                "n": 3}])
def test_fixed_bug_play_of_a_game_of_moves_that_are_not_one_discrete_choice_plays_or_is_refused_in_one_line(act):
    spec = {**GAME, "mask": None, "seats": [{"obs": BOX, "act": act}] * 2}
    run = {**RUN, "run.eval_episodes": 0}
    check_case(spec, run, "auto", "factory", None, False, (None, ["0", "1", "2"]), label="fixed bug")
    with tempfile.TemporaryDirectory() as tmp:  # from Python the refusal names the Python call to use instead
        run_dir = Path(tmp) / "run"
        shell.train(env=lambda: FuzzGame(spec), overrides=run, run_dir=run_dir, progress=False)
        with pytest.raises(ConfigError) as info:
            shell.play(run_dir, env=lambda: FuzzGame(spec), stdin=io.StringIO("0\n"))
        assert str(info.value).endswith(f"evaluate it with shell.evaluate({str(run_dir)!r}, env=<game factory>)")


@pytest.mark.parametrize("kind", ["raise", "nan_reward"])
def test_fixed_bug_play_of_a_game_that_raises_or_pays_nan_ends_in_one_line(kind):
    spec = {**GAME, "games": [[8, "terminated", 0]], "fault": {"kind": kind, "at": 6}}  # past training's 4 moves
    run = {**RUN, "env.num_envs": 1, "ppo.num_steps": 4, "run.total_timesteps": 4, "run.eval_episodes": 0}
    check_case(spec, run, "auto", "factory", None, False, (None, ["0", "1", "2"] * 8), label="fixed bug")
