"""Self-play against a pool of past snapshots ([selfplay]; issue 36): snapshot opponents act and never learn, their
rows enter no update, the pool comes back on --resume, and games the pool cannot play are refused in one line."""

from __future__ import annotations

import itertools
import json
import math

import attrs
import numpy as np
import pytest
import torch

from shell.api import resume, train
from shell.cli import main
from shell.config import load_config
from shell.errors import ConfigError
from shell.evaluation import eval_checkpoint
from shell.games import BOT, LATEST, RANDOM, MatchTable, OpponentPool
from shell.logs import CSV_FIELDS, GAME_FIELDS, complete_rows
from shell.plotting import plot_runs, read_ratings
from shell.runner import Trainer

from . import game_bots
from .test_turns import config

POOL = {"selfplay.snapshot_every": 1, "selfplay.pool_size": 2, "selfplay.latest_prob": 0.25, "env.num_envs": 4,
        "run.total_timesteps": 200, "run.eval_episodes": 2, "run.checkpoint_every": 1}


def tensors(module: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def test_snapshots_never_change_and_their_rows_enter_no_update(tmp_path, monkeypatch):
    """Every snapshot keeps the weights and observation statistics it was taken with while the learner moves on;
    at every step the rows stored as valid are the learner's (a snapshot's rows never are), and the learner
    plays one seat of a copy against a snapshot, every seat against itself."""
    seen: dict[int, dict[str, torch.Tensor]] = {}
    steps: list[tuple[torch.Tensor, torch.Tensor]] = []
    act = OpponentPool.moves_in

    def recording_act(pool, rows, actions):
        steps.append((torch.as_tensor(pool.learner_rows()), torch.as_tensor(pool.opponent).clone()))
        return act(pool, rows, actions)

    monkeypatch.setattr(OpponentPool, "moves_in", recording_act)
    trainer = Trainer(config(**POOL), tmp_path / "run", progress=False)
    pool = trainer.pool
    learner = trainer.lanes.only
    initial = tensors(learner.agent)
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        for update in range(1, 5):
            steps.clear()
            rows, _ = trainer.collect(rows)
            valid = learner.storage.valid  # [T, N], after turn_gae dropped the incomplete moves
            for t, (mine, opponent) in enumerate(steps):
                assert not (valid[t] & ~mine).any(), t  # no snapshot row is a learner's transition
                per_copy = mine.view(4, 2).sum(dim=1)
                assert per_copy.tolist() == [2 if o == LATEST else 1 for o in opponent.tolist()], t
            trainer.lanes.update()
            trainer.pool.after_update(update)
            for taken, player in pool.players().items():
                seen.setdefault(taken, tensors(player))
                assert all(torch.equal(seen[taken][k], v) for k, v in tensors(player).items()), taken
                assert not any(p.requires_grad for p in player.parameters())
        assert pool.taken_at == [3, 4] and len(seen) == 5  # the initial policy, then one per update
        assert all(torch.equal(seen[0][k], v) for k, v in initial.items())  # the initial snapshot: the start
        assert not all(torch.equal(initial[k], v) for k, v in tensors(learner.agent).items())  # the learner moved
    finally:
        trainer.env.close()


def record_moves(monkeypatch) -> list[tuple[torch.Tensor, torch.Tensor, np.ndarray, torch.Tensor, torch.Tensor]]:
    """Record, at every step of :meth:`OpponentPool.moves_in`, the learner's rows, each copy's opponent and move
    count, the actions sent and the mask."""
    steps = []
    act = OpponentPool.moves_in

    def recording_act(pool, rows, actions):
        out = act(pool, rows, actions)
        steps.append((torch.as_tensor(pool.learner_rows()), torch.as_tensor(pool.opponent).clone(),
                      pool.moves.copy(), out.clone(), rows.action_mask.clone()))
        return out

    monkeypatch.setattr(OpponentPool, "moves_in", recording_act)
    return steps


def test_uniform_random_opponents_play_one_seat_legally_and_never_enter_the_update(tmp_path, monkeypatch):
    """selfplay.random_prob = 1 without snapshots: every game is the learner in one seat (alternating from game to
    game) against uniform-random legal moves (Duel raises on an illegal one); those moves are spread over the legal
    actions and their rows are never stored as valid. The pool holds no snapshot, and it is checkpointed."""
    steps = record_moves(monkeypatch)
    cfg = config(**{"selfplay.random_prob": 1.0, "env.num_envs": 4, "run.total_timesteps": 200,
                    "run.eval_episodes": 2})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    pool, learner = trainer.pool, trainer.lanes.only
    try:
        assert pool.snapshots == [] and pool.players() == {}
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        seats, theirs = [], []
        for _ in range(3):
            steps.clear()
            rows, _ = trainer.collect(rows)
            valid = learner.storage.valid
            for t, (mine, opponent, _, actions, mask) in enumerate(steps):
                assert (opponent == RANDOM).all()
                assert mine.view(4, 2).sum(dim=1).tolist() == [1] * 4  # the learner plays one seat of each copy
                assert not (valid[t] & ~mine).any(), t  # the random seat's moves are no transition of the learner
                seats.append(mine.view(4, 2)[:, 0].clone())
                acting = ~mine & mask.any(dim=1)
                assert mask[acting].gather(1, actions[acting].long()[:, None]).all()  # legal
                theirs += actions[acting].tolist()
            trainer.lanes.update()
            trainer.pool.after_update(1)
        assert pool.snapshots == []  # snapshot_every = 0: none is ever taken
        # Duel's games last 5 moves: the learner's seat in copy 0 changes after every game
        assert not torch.equal(torch.stack(seats[:5]), torch.stack(seats[5:10]))
        assert {0, 1, 2} <= set(theirs)  # uniform over the legal moves (action 0 is legal at even moves)
        assert trainer.state_dict()["selfplay"]["snapshots"] == []
    finally:
        trainer.env.close()


def test_opening_moves_are_uniform_random_legal_moves_that_no_seat_learns_from(tmp_path, monkeypatch):
    """selfplay.opening_moves = 2 without snapshots: the first two moves of every game are uniform-random legal
    moves (Duel raises on an illegal one) in no seat's rows, so no transition of the learner; from the third move
    on the learner plays every seat. Every game ends after 5 moves, so the count restarts with each game."""
    steps = record_moves(monkeypatch)
    cfg = config(**{"selfplay.opening_moves": 2, "env.num_envs": 4, "run.total_timesteps": 200,
                    "run.eval_episodes": 2})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    pool, learner = trainer.pool, trainer.lanes.only
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        opening, learned = [], 0
        for _ in range(3):
            steps.clear()
            rows, _ = trainer.collect(rows)
            valid = learner.storage.valid
            for t, (mine, _, moves, actions, mask) in enumerate(steps):
                in_opening = torch.as_tensor(moves < 2)
                assert set(moves.tolist()) <= {0, 1, 2, 3, 4}, moves  # Duel's 5 moves, then a new game
                assert not mine.view(4, 2)[in_opening].any(), t  # an opening move is no seat's
                assert mine.view(4, 2)[~in_opening].all(), t  # after it, the learner plays every seat
                assert not (valid[t] & ~mine).any(), t  # so no opening move is stored as the learner's
                learned += int(valid[t].sum())
                acting = mask.any(dim=1) & torch.as_tensor(np.repeat(moves < 2, 2))
                assert mask[acting].gather(1, actions[acting].long()[:, None]).all()  # legal
                opening += actions[acting].tolist()
            trainer.lanes.update()
        assert {0, 1, 2} <= set(opening) and learned > 0
        assert pool.snapshots == [] and pool.opponent.tolist() == [LATEST] * 4
    finally:
        trainer.env.close()


def test_varied_openings_are_each_games_own_length_from_0_to_opening_moves(tmp_path, monkeypatch):
    """selfplay.vary_openings with opening_moves = 3: each game of Duel (5 moves) draws its opening's length from 0 to
    3, all four lengths occur and it holds for the whole game; a copy's moves before that length are no seat's,
    after it the learner plays every seat; and nothing else changes where it is off (the fixed length)."""
    lengths = []
    act = OpponentPool.moves_in

    def recording_act(pool, rows, actions):
        lengths.append((pool.opening_length.copy(), pool.moves.copy(), torch.as_tensor(pool.learner_rows())))
        return act(pool, rows, actions)

    monkeypatch.setattr(OpponentPool, "moves_in", recording_act)
    cfg = config(**{"selfplay.opening_moves": 3, "selfplay.vary_openings": True, "env.num_envs": 4,
                    "run.total_timesteps": 200, "run.eval_episodes": 0})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        for _ in range(3):
            rows, _ = trainer.collect(rows)
            trainer.lanes.update()
    finally:
        trainer.env.close()
    seen = set()
    for (length, moves, mine), (next_length, next_moves, _) in itertools.pairwise(lengths):
        in_opening = torch.as_tensor(moves < length)
        assert not mine.view(4, 2)[in_opening].any() and mine.view(4, 2)[~in_opening].all()
        same_game = next_moves == moves + 1
        assert (next_length[same_game] == length[same_game]).all()  # a game keeps its length
        seen.update(length.tolist())
    assert seen == {0, 1, 2, 3}
    with pytest.raises(ConfigError, match=r"selfplay\.vary_openings = true draws each opening's length from 0 to "
                                          r"selfplay\.opening_moves, which is 0"):
        config(**{"selfplay.vary_openings": True, "selfplay.random_prob": 0.5})


def test_bots_play_one_seat_when_it_is_their_move_and_never_enter_the_update(tmp_path, monkeypatch):
    """selfplay.bot_prob = 1: every game is the learner in one seat against the bot, which is called once per move
    of its own seat (never for a seat that is not to move: Duel's other mask is all zeros), with that row's
    observation and legal moves; its moves are the ones sent, and its rows are never the learner's transitions."""
    calls = []

    def recording(observation, action_mask):
        move = game_bots.uniform(observation, action_mask)
        calls.append((observation["observation"].copy(), action_mask.copy(), move))
        return move

    monkeypatch.setattr(game_bots, "recording", recording, raising=False)
    steps = []
    act = OpponentPool.moves_in

    def recording_act(pool, rows, actions):
        out = act(pool, rows, actions)
        steps.append((torch.as_tensor(pool.learner_rows()), torch.as_tensor(pool.opponent).clone(), out.clone(),
                      rows.valid.clone()))
        return out

    monkeypatch.setattr(OpponentPool, "moves_in", recording_act)
    cfg = config(**{"selfplay.bots": ["tests.integration.game_bots:recording"], "selfplay.bot_prob": 1.0,
                    "env.num_envs": 4, "run.total_timesteps": 200, "run.eval_episodes": 2})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    learner = trainer.lanes.only
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        sent = []
        for _ in range(3):
            steps.clear()
            calls.clear()
            rows, _ = trainer.collect(rows)
            valid = learner.storage.valid
            for t, (mine, opponent, actions, to_move) in enumerate(steps):
                assert (opponent == BOT).all()
                assert mine.view(4, 2).sum(dim=1).tolist() == [1] * 4  # the learner plays one seat of each copy
                assert not (valid[t] & ~mine).any(), t  # the bot's moves are no transition of the learner
                sent += actions[~mine & to_move].tolist()
            assert len(calls) == len(sent)  # one call per move of the bot's seat, none for a seat not to move
            assert [c[2] for c in calls] == sent  # its moves were the ones sent
            assert all(c[1].any() and c[1][c[2]] for c in calls)  # called with the row's legal moves
            sent.clear()
            trainer.lanes.update()
        assert {1, 2} <= {c[2] for c in calls}
    finally:
        trainer.env.close()


def test_a_training_bot_that_plays_an_illegal_move_is_exit_1_naming_it(tmp_path, capsys):
    code = main(["--config", "tictactoe", "--run-dir", str(tmp_path / "run"), "--total-timesteps", "128",
                 "--set", "env.num_envs=8", "--set", "ppo.num_steps=16", "--set", "run.loggers=[]",
                 "--set", 'selfplay.bots=["tests.integration.game_bots:illegal"]', "--set", "selfplay.bot_prob=0.5"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 1
    assert "training opponent 'tests.integration.game_bots:illegal' played the illegal move" in last
    assert "legal moves were" in last


@pytest.mark.parametrize("key", ["selfplay.bots", "run.eval_opponents"])
def test_a_bot_that_raises_is_exit_1_in_one_line_naming_it(tmp_path, capsys, key):
    """A bug of the bot's own, in training or at evaluation: one line naming the bot and its exception."""
    bot = "tests.integration.game_bots:raising"
    extra = ["--set", "selfplay.bot_prob=0.5"] if key == "selfplay.bots" else ["--set", "run.eval_episodes=2"]
    code = main(["--config", "tictactoe", "--run-dir", str(tmp_path / "run"), "--total-timesteps", "128",
                 "--set", "env.num_envs=8", "--set", "ppo.num_steps=16", "--set", "run.loggers=[]",
                 "--set", f'{key}=["{bot}"]', *extra])
    err = capsys.readouterr().err.strip().splitlines()
    role = "training opponent" if key == "selfplay.bots" else "evaluation opponent"
    assert code == 1 and err[-1].startswith(f"error: {role} '{bot}' raised ZeroDivisionError: division by zero"), err
    assert not any("Traceback" in line for line in err)


@pytest.mark.parametrize(("sets", "message"), [
    ({"selfplay.bots": ["tests.integration.game_bots:uniform"], "selfplay.bot_prob": 0.0},
     "selfplay.bots and selfplay.bot_prob go together"),
    ({"selfplay.bots": [], "selfplay.bot_prob": 0.5}, "selfplay.bots and selfplay.bot_prob go together"),
    ({"selfplay.bots": ["tests.integration.game_bots:uniform"], "selfplay.bot_prob": 0.6,
      "selfplay.random_prob": 0.5}, "add up to at most 1"),
    ({"selfplay.bots": ["no_such_module_xyz:bot"], "selfplay.bot_prob": 0.5},
     "selfplay.bots entry 'no_such_module_xyz:bot': cannot import 'no_such_module_xyz'"),
    ({"selfplay.bots": ["not a name"], "selfplay.bot_prob": 0.5}, "neither \"random\" nor a bot"),
])
def test_bots_that_cannot_play_are_refused_in_one_line_with_exit_2(tmp_path, capsys, sets, message):
    args = [a for k, v in sets.items() for a in ("--set", f"{k}={json.dumps(v)}")]
    code = main(["--config", "tictactoe", "--run-dir", str(tmp_path / "run"), "--set", "run.loggers=[]", *args])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and message in err[0], err
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_random_prob_zero_draws_the_games_of_a_pool_without_it():
    """random_prob = 0 (the default) makes no draw of its own: a pool's opponents are those it drew before the
    option existed; 0.5 mixes uniform-random games with the pool's."""
    cfg = load_config(None, {"selfplay.snapshot_every": 1})
    agent = torch.nn.Linear(1, 1)
    plain = OpponentPool(agent, cfg.selfplay, ["a", "b"], 64, seed=3, device=torch.device("cpu"))
    rng = np.random.default_rng(3)
    expected = np.where(rng.random(64) < 0.5, LATEST, rng.integers(0, 1, 64))
    assert plain.opponent.tolist() == expected.tolist()
    mixed = OpponentPool(agent, load_config(None, {"selfplay.snapshot_every": 1, "selfplay.random_prob": 0.5}
                                            ).selfplay, ["a", "b"], 64, seed=3, device=torch.device("cpu"))
    assert {RANDOM, LATEST, 0} == set(mixed.opponent.tolist())
    # bot_prob = 0 (the default) makes no draw of its own either: random_prob's games are those drawn before bots
    rng = np.random.default_rng(3)
    u = rng.random(64)
    expected = np.where(u < 0.5, RANDOM, np.where(rng.random(64) < 0.5, LATEST, rng.integers(0, 1, 64)))
    assert mixed.opponent.tolist() == expected.tolist()
    bots = OpponentPool(agent, load_config(None, {"selfplay.snapshot_every": 1, "selfplay.random_prob": 0.25,
                                                  "selfplay.bot_prob": 0.5, "selfplay.bots": [
                                                      "tests.integration.game_bots:uniform", "random"]}
                                           ).selfplay, ["a", "b"], 4096, seed=3, device=torch.device("cpu"))
    share = {k: float(np.mean(bots.opponent == k)) for k in (RANDOM, BOT, BOT - 1)}
    assert abs(share[RANDOM] - 0.25) < 0.03 and abs(share[BOT] - 0.25) < 0.03 and abs(share[BOT - 1] - 0.25) < 0.03


def test_the_pool_is_saved_in_checkpoints_and_comes_back_on_resume(tmp_path):
    run_dir = tmp_path / "run"
    cfg = config(**{**POOL, "selfplay.pool_size": 3, "run.total_timesteps": 160})  # 4 updates of 40 moves
    train(config=cfg, run_dir=run_dir, progress=False)
    first = torch.load(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=False)
    assert first["selfplay"]["taken_at"] == [2, 3, 4]
    result = resume(run_dir, total_timesteps=240, progress=False)
    assert result.summary["updates"] == 6
    last = torch.load(sorted((run_dir / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=False)
    assert last["selfplay"]["taken_at"] == [4, 5, 6]  # a fresh pool would hold the resumed run's initial policy
    old, new = first["selfplay"]["snapshots"][-1], last["selfplay"]["snapshots"][0]
    assert all(torch.equal(old[k], new[k]) for k in old)


def metrics_rows(run_dir) -> list[dict[str, str]]:
    """metrics.csv's rows without the wall-time columns."""
    return [{k: v for k, v in row.items() if k not in ("seconds", "sps")}
            for row in complete_rows(run_dir / "metrics.csv", 10**6, CSV_FIELDS + GAME_FIELDS)]


@pytest.mark.parametrize("sets", [
    {"selfplay.snapshot_every": 1, "selfplay.pool_size": 2, "selfplay.latest_prob": 0.25},
    {"selfplay.snapshot_every": 1, "selfplay.pool_size": 2, "selfplay.latest_prob": 0.25, "selfplay.random_prob": 0.2,
     "selfplay.bots": ["tests.integration.game_bots:first_legal", "random"], "selfplay.bot_prob": 0.3,
     "selfplay.opening_moves": 2, "selfplay.vary_openings": True},
], ids=["snapshots", "every-opponent"])
def test_a_selfplay_run_resumed_at_a_game_boundary_repeats_the_uninterrupted_run(tmp_path, sets):
    """Duel's games last 5 moves and a rollout is 10: every checkpoint falls on a game boundary. A run stopped after
    3 updates and resumed to 6 gives the uninterrupted run's rows and weights: the restored pool's draws (each
    copy's opponent, seat and opening) are played, not drawn again."""
    cfg = config(**{**sets, "env.num_envs": 4, "run.eval_episodes": 2, "run.checkpoint_every": 1,
                    "run.total_timesteps": 240})  # 6 updates of 40 moves
    straight = train(config=cfg, run_dir=tmp_path / "straight", progress=False).summary
    train(config=attrs.evolve(cfg, run=attrs.evolve(cfg.run, total_timesteps=120)), run_dir=tmp_path / "split",
          progress=False)
    resumed = resume(tmp_path / "split", total_timesteps=240, progress=False).summary
    assert resumed["updates"] == straight["updates"] == 6
    assert metrics_rows(tmp_path / "split") == metrics_rows(tmp_path / "straight")
    ends = [torch.load(sorted((tmp_path / name / "checkpoints").glob("ckpt_*.pt"))[-1], weights_only=False)
            for name in ("straight", "split")]
    assert all(torch.equal(ends[0]["model"][k], ends[1]["model"][k]) for k in ends[0]["model"])
    assert ends[0]["selfplay"]["opponent"] == ends[1]["selfplay"]["opponent"]


def test_the_pool_is_played_seat_by_seat_and_rated_at_every_evaluation(tmp_path):
    """Duel's first seat wins whatever is played, so every player scores one game in two: every rating is 0. The
    snapshots are opponents in eval_vs (and in ``eval RUN``), the rating goes into metrics.csv's last column at
    the periodic evaluation, and the snapshots' rating games are played once per pair."""
    run_dir = tmp_path / "run"
    cfg = config(**{**POOL, "run.eval_every": 2, "run.total_timesteps": 160})  # 4 updates; evaluated at 2
    summary = train(config=cfg, run_dir=run_dir, progress=False).summary
    seats = {"seat_0": {"win": 1.0, "draw": 0.0, "loss": 0.0, "games": 1, "distinct": 1},
             "seat_1": {"win": 0.0, "draw": 0.0, "loss": 1.0, "games": 1, "distinct": 1}}
    assert summary["eval_vs"] == {"random": seats, "snapshot@3": seats, "snapshot@4": seats}
    assert summary["elo"] == {"random": 0.0, "policy": 0.0, "snapshot@3": 0.0, "snapshot@4": 0.0}
    lines = (run_dir / "metrics.csv").read_text().splitlines()
    assert lines[0].endswith(",eval_return,elo")
    assert [line.rsplit(",", 1)[1] for line in lines[1:]] == ["", "0.0", "", ""]
    steps, elo = read_ratings(run_dir)
    assert steps.tolist() == [80.0] and elo.tolist() == [0.0] and plot_runs([run_dir]).is_file()  # a panel below
    evaluated = eval_checkpoint(run_dir, episodes=2)
    assert set(evaluated["eval_vs"]) == {"random", "snapshot@3", "snapshot@4"} and evaluated["elo"]["policy"] == 0.0


def test_a_game_run_written_before_the_elo_column_resumes_with_its_rows(tmp_path):
    path = tmp_path / "metrics.csv"
    path.write_text(",".join(CSV_FIELDS) + "\n" + "\n".join(",".join([str(u)] + ["1"] * (len(CSV_FIELDS) - 1))
                                                        for u in (1, 2, 3)) + "\n")
    rows = complete_rows(path, 2, CSV_FIELDS + GAME_FIELDS)
    assert [(row["update"], row["elo"]) for row in rows] == [("1", ""), ("2", "")]


def test_ratings_are_anchored_at_random_and_do_not_depend_on_the_order_of_the_games():
    results = [("policy", "random", [1.0] * 10), ("snapshot@0", "random", [1.0, 0.0, -1.0, -1.0]),
               ("policy", "snapshot@0", [1.0, 1.0, 0.0]), ("snapshot@5", "snapshot@0", [-2.0, 3.0])]
    forward, backward = MatchTable(), MatchTable()
    for a, b, scores in results:
        forward.record(a, b, scores)
    for a, b, scores in reversed(results):
        backward.record(b, a, [-s for s in scores])
    assert forward.elo() == backward.elo() and forward.elo()["random"] == 0.0
    alone = MatchTable()
    alone.record("policy", "random", [1.0] * 10)  # one virtual draw: a score of 10.5 in 11
    assert alone.elo() == {"policy": round(400 * math.log10(10.5 / 0.5), 1), "random": 0.0}
    apart = MatchTable()
    apart.record("random", "policy", [1.0])
    apart.record("snapshot@0", "snapshot@5", [1.0])  # never met the anchor's group
    assert apart.elo()["snapshot@0"] is None


def test_a_game_whose_seats_differ_in_spaces_is_refused_naming_the_groups(tmp_path, capsys):
    cfg = config(**{"env.id": "tests.integration.turn_games:lopsided", "selfplay.snapshot_every": 5})
    try:
        train(config=cfg, run_dir=tmp_path / "run", progress=False)
    except ConfigError as exc:
        message = str(exc)
    assert "\n" not in message and len(message) <= 200 and "2 groups" in message, message
    assert ": seat_0;" in message and ": seat_1)" in message, message
    code = main(["--config", "tictactoe", "--run-dir", str(tmp_path / "cli"), "--set",
                 "env.id=tests.integration.turn_games:lopsided", "--set", "selfplay.snapshot_every=5"])
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert code == 2 and last.startswith("error: [selfplay] needs one policy in every seat")


def test_a_parallel_env_is_refused(tmp_path):
    cfg = load_config("simple-spread", {"env.num_envs": 1, "env.vectorization_mode": "sync",
                                        "selfplay.snapshot_every": 1})
    try:
        train(config=cfg, run_dir=tmp_path / "run", progress=False)
    except ConfigError as exc:
        assert "serves turn-based games" in str(exc) and "\n" not in str(exc)
    else:
        raise AssertionError("not refused")


def test_random_prob_on_moves_that_are_not_one_discrete_choice_is_refused_and_a_pool_still_plays(tmp_path, capsys):
    paired = "tests.integration.turn_games:paired"  # MultiDiscrete([3, 2]) moves
    try:
        train(config=config(**{"env.id": paired, "selfplay.random_prob": 0.5}), run_dir=tmp_path / "run",
              progress=False)
    except ConfigError as exc:
        message = str(exc)
    else:
        raise AssertionError("not refused")
    assert "\n" not in message and "MultiDiscrete" in message
    try:  # the random openings draw the same kind of moves
        train(config=config(**{"env.id": paired, "selfplay.opening_moves": 1}), run_dir=tmp_path / "opening",
              progress=False)
    except ConfigError as exc:
        assert str(exc) == message
    else:
        raise AssertionError("not refused")
    code = main(["--config", "tictactoe", "--run-dir", str(tmp_path / "cli"), "--set", f"env.id={paired}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and err == [f"error: {message}"]
    # the same game with a pool of snapshots and no random opponents trains: the refusal is random_prob's
    result = train(config=config(**{**POOL, "env.id": paired, "env.num_envs": 2, "run.total_timesteps": 40}),
                   run_dir=tmp_path / "pool", progress=False)
    assert result.summary["env_steps"] >= 40 and result.summary["updates"] >= 2
