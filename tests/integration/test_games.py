"""The games' home (shell/games/): each opponent against a reference, the pool's draw, the pool's env (a snapshot's
moves enter no update), and ratings from match tables computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from gymnasium import spaces

from shell.config import PolicyConfig, load_config
from shell.envs import Rows
from shell.errors import TrainingError
from shell.games import (
    BOT,
    LATEST,
    POLICY,
    RANDOM,
    BotOpponent,
    Opponent,
    OpponentPool,
    RandomOpponent,
    Ratings,
    SnapshotOpponent,
    play_rows,
)
from shell.policies import ActorCritic
from shell.runner import Trainer

from . import game_bots
from .test_turns import config, legal_actions

CPU = torch.device("cpu")


def rows_of(mask: list[list[bool]] | None, valid: list[bool], obs_size: int = 3, seed: int = 0) -> Rows:
    n = len(valid)
    obs = torch.as_tensor(np.random.default_rng(seed).normal(size=(n, obs_size)), dtype=torch.float32)
    return Rows(obs, torch.tensor(valid), None if mask is None else torch.tensor(mask))


def test_random_moves_are_a_uniform_draw_of_each_rows_legal_moves():
    """Reference: one torch.multinomial draw per row over the legal moves (all moves where a row has none or there
    is no mask) from the same generator state; over many draws each legal move comes up as often as the others."""
    mask = [[True, False, True, False], [False, False, False, False], [False, True, False, False]]
    rows = rows_of(mask, [True, False, True])
    opponent = RandomOpponent(torch.Generator().manual_seed(5))
    got = opponent.act(rows, torch.tensor([True, True, True]), 4)
    reference = torch.multinomial(torch.tensor([[1.0, 0, 1, 0], [1, 1, 1, 1], [0, 1, 0, 0]]), 1,
                                  generator=torch.Generator().manual_seed(5)).squeeze(1)
    assert torch.equal(got, reference)
    draws = torch.stack([opponent.act(rows, torch.ones(3, dtype=torch.bool), 4) for _ in range(4000)])
    assert set(draws[:, 0].tolist()) == {0, 2} and set(draws[:, 2].tolist()) == {1}
    assert abs(float((draws[:, 0] == 0).float().mean()) - 0.5) < 0.04
    unmasked = torch.stack([opponent.act(rows_of(None, [True]), torch.ones(1, dtype=torch.bool), 3)
                            for _ in range(3000)])
    assert abs(np.bincount(unmasked.flatten().numpy(), minlength=3) / 3000 - 1 / 3).max() < 0.04


def test_a_bot_is_called_once_for_each_of_its_rows_to_move_with_that_rows_observation_and_legal_moves():
    calls = []

    def bot(observation, action_mask):
        calls.append((observation.copy(), action_mask.copy()))
        return int(np.flatnonzero(action_mask)[-1])

    mask = [[True, True, False], [True, False, False], [False, True, True], [True, True, True]]
    rows = rows_of(mask, [True, True, False, True])
    mine = torch.tensor([True, False, True, True])  # row 2 is its own but not to move; row 1 another's
    moves = BotOpponent("my:bot", bot, "training opponent").act(rows, mine, 3)
    assert [i for i, (obs, _) in enumerate(calls)] == [0, 1]
    assert np.array_equal(calls[0][0], rows.obs[0].numpy()) and np.array_equal(calls[1][0], rows.obs[3].numpy())
    assert calls[0][1].tolist() == mask[0] and calls[1][1].tolist() == mask[3]
    assert moves[0] == 1 and moves[3] == 2
    with pytest.raises(TrainingError, match=r"^evaluation opponent 'x:illegal' played the illegal move 0; the legal "
                                            r"moves were \[1, 2\]$"):
        BotOpponent("x:illegal", game_bots.illegal, "evaluation opponent").act(
            rows_of([[False, True, True]], [True]), torch.tensor([True]), 3)


def test_a_snapshot_samples_its_policy_under_each_rows_mask_as_the_policy_itself_does():
    player = ActorCritic(3, spaces.Discrete(4), PolicyConfig(hidden_sizes=[8])).eval().requires_grad_(False)
    mask = [[True, False, True, True], [False, True, False, False]]
    rows = rows_of(mask, [True, True])
    got = SnapshotOpponent("snapshot@0", player, torch.Generator().manual_seed(9)).act(rows, torch.ones(2).bool(), 4)
    reference = player.act(rows.obs, deterministic=False, generator=torch.Generator().manual_seed(9),
                           action_mask=rows.action_mask)
    assert torch.equal(got, reference) and got[1] == 1 and got[0] != 1


def test_play_rows_takes_the_opponents_moves_in_its_rows_only():
    rows = rows_of([[True, True]] * 4, [True] * 4)
    mine = torch.tensor([False, True, False, True])
    out = play_rows(torch.full((4,), 7), BotOpponent("b", lambda o, m: 1, "r"), rows, mine, 2)
    assert out.tolist() == [7, 1, 7, 1]

    class TwoParts(Opponent):  # a snapshot of a MultiDiscrete policy moves [N, K]
        def act(self, rows, mine, num_actions, start=0):
            return torch.ones(len(rows.valid), 2, dtype=torch.long)

    two_part = play_rows(torch.full((4, 2), 7), TwoParts(), rows, mine, 2)
    assert two_part.tolist() == [[7, 7], [1, 1], [7, 7], [1, 1]]


@pytest.mark.parametrize("start", [-3, 0, 5])
def test_random_and_bot_moves_are_moves_of_a_discrete_space_with_a_start(start):
    """A Discrete(n, start) lane: the random and bot opponents' moves are its index plus start, as the policy's
    (a bot answers the index of a legal move)."""
    rows = rows_of([[False, True, True], [True, False, False]], [True, True])
    mine = torch.ones(2, dtype=torch.bool)
    random = play_rows(torch.zeros(2, dtype=torch.long), RandomOpponent(torch.Generator().manual_seed(0)), rows,
                       mine, 3, start)
    assert random[0].item() in (start + 1, start + 2) and random[1].item() == start
    bot = play_rows(torch.zeros(2, dtype=torch.long), BotOpponent("b", lambda o, m: int(m.nonzero()[0][-1]), "r"),
                    rows, mine, 3, start)
    assert bot.tolist() == [start + 2, start]


def test_the_pools_draw_follows_the_reference_rule():
    """The draw written out as a loop over copies, from the same NumPy stream: random, then a bot, then the learner
    or a snapshot (uniform over the pool)."""
    cfg = load_config(None, {"selfplay.snapshot_every": 1, "selfplay.random_prob": 0.2, "selfplay.bot_prob": 0.3,
                             "selfplay.latest_prob": 0.4, "selfplay.pool_size": 3,
                             "selfplay.bots": ["tests.integration.game_bots:uniform", "random"]}).selfplay
    pool = OpponentPool(torch.nn.Linear(1, 1), cfg, ["a", "b"], 50, seed=11, device=CPU)
    for update in (1, 2):
        pool.snapshot(update)
    rng = np.random.default_rng(11)
    rng.random(50), rng.random(50), rng.integers(0, 1, 50), rng.integers(0, 2, 50)  # at construction: 1 snapshot
    drawn = pool._draw(50)
    u, latest, which, bot = rng.random(50), rng.random(50), rng.integers(0, 3, 50), rng.integers(0, 2, 50)
    expected = [RANDOM if u[i] < 0.2 else BOT - bot[i] if u[i] < 0.5 else LATEST if latest[i] < 0.4 else which[i]
                for i in range(50)]
    assert drawn.tolist() == expected
    assert {RANDOM, BOT, BOT - 1, LATEST, 0, 1, 2} == set(drawn.tolist())


def test_the_pools_env_shows_the_learner_only_its_rows_and_plays_every_other_row(tmp_path, monkeypatch):
    """Under [selfplay] the rows the learner's lane receives are valid only where the learner is to move, so a
    snapshot's or random move enters no update, no normaliser and no advantage; the env receives the learner's
    actions in its rows and the opponents' legal moves in the others."""
    cfg = config(**{"selfplay.snapshot_every": 1, "selfplay.latest_prob": 0.0, "selfplay.random_prob": 0.5,
                    "env.num_envs": 4, "run.total_timesteps": 80, "run.eval_episodes": 0})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    inner, pool = trainer.env.env, trainer.pool
    (lane,) = inner.lanes
    sent = []
    step = inner.step
    monkeypatch.setattr(inner, "step", lambda actions: (sent.append(actions[lane].clone()), step(actions))[1])
    opponents_moved = 0
    try:
        rows = trainer.env.reset(seed=0)[lane]
        for _ in range(30):
            env_rows = trainer.env._rows
            assert torch.equal(rows.valid, env_rows.valid & torch.as_tensor(pool.learner_rows()))
            action = legal_actions(env_rows)
            results = trainer.env.step({lane: action})[lane]
            theirs = env_rows.valid & ~rows.valid
            assert torch.equal(sent[-1][rows.valid], action[rows.valid])  # the learner's moves, as it gave them
            assert env_rows.action_mask[theirs].gather(1, sent[-1][theirs][:, None]).all()  # the opponents' legal
            opponents_moved += int(theirs.sum())
            rows = Rows(results.obs, results.valid, results.action_mask)
    finally:
        trainer.env.close()
    assert opponents_moved > 10


def test_ratings_from_a_match_table_computed_by_hand():
    """One virtual draw per pair: the policy 3 wins and 1 loss against random scores 3.5 of 5, so its rating is
    400 log10(3.5 / 1.5) above random's 0; a bot beaten in every game, 2-0, scores 0.5 of 3 against the policy."""
    specs = {None: type("Spec", (), {"turns": True, "action_space": spaces.Discrete(3)})()}
    ratings = Ratings(specs, seed=0, seed_scheme="spawn")
    assert ratings.rated and ratings.fields == ("elo",)
    elo = ratings.rate({"random": [1, 1, -1, 1]}, {"random": None}, {}, CPU, play=None)
    assert elo == {"random": 0.0, POLICY: round(400 * math.log10(3.5 / 1.5), 1)}
    assert ratings.columns(elo) == {"elo": elo[POLICY]} and ratings.columns(None) == {"elo": ""}
    # two players against the policy only: random at 0, the policy as above, the bot 400 log10(0.5 / 2.5) below it
    both = ratings.rate({"random": [1, 1, -1, 1], "b:bot": [1, 1]}, {"random": None}, {}, CPU, play=None)
    assert set(both) == {"random", POLICY, "b:bot"}
    p = both[POLICY]
    assert both["b:bot"] == pytest.approx(p + 400 * math.log10(0.5 / 2.5), abs=0.1)
    assert not Ratings({None: type("Spec", (), {"turns": False, "action_space": spaces.Discrete(3)})()}, 0,
                       "spawn").fields


def test_the_snapshots_rating_games_are_played_once_a_run_and_forgotten_when_the_snapshot_leaves():
    specs = {None: type("Spec", (), {"turns": True, "action_space": spaces.Discrete(3)})()}
    ratings = Ratings(specs, seed=0, seed_scheme="spawn")
    played = []

    def play(player, opponent, sampling):
        played.append((player, opponent.name))
        return [1.0, -1.0]  # one win, one loss: every rating 0

    snapshots = {0: "s0", 2: "s2"}
    elo = ratings.rate({"random": [1, -1], "snapshot@0": [1, -1], "snapshot@2": [1, -1]}, {"random": None},
                       snapshots, CPU, play)
    assert played == [("s0", "random"), ("s0", "snapshot@2"), ("s2", "random")]
    assert set(elo) == {"random", POLICY, "snapshot@0", "snapshot@2"} and all(v == 0.0 for v in elo.values())
    ratings.rate({"random": [1, -1]}, {"random": None}, snapshots, CPU, play)
    assert len(played) == 3  # played once a run
    ratings.rate({"random": [1, -1]}, {"random": None}, {2: "s2", 3: "s3"}, CPU, play)
    assert played[3:] == [("s2", "snapshot@3"), ("s3", "random")]
    assert ("snapshot@0", "random") not in ratings._pool_games  # snapshot@0 left the pool


def test_an_opponent_given_as_anything_but_a_name_and_a_move_that_is_no_integer_are_one_line_each():
    from shell.errors import ConfigError
    from shell.evaluation import EvalSpec, evaluate

    spec = EvalSpec(config().env, 2, 0, opponents=[game_bots.uniform])
    with pytest.raises(ConfigError, match=r"^run\.eval_opponents entry <function uniform at .*> is not a name: give "
                                          r"\"random\" or a bot's \"module:function\"$"):
        evaluate(ActorCritic(3, spaces.Discrete(3), PolicyConfig()), spec, CPU)
    with pytest.raises(TrainingError, match=r"^opponent 'b' returned 1\.0, not an integer move; the legal moves "
                                            r"were \[0, 1\]$"):
        BotOpponent("b", lambda o, m: 1.0).act(rows_of([[True, True]], [True]), torch.tensor([True]), 2)
