"""Turn-based (AEC) games on env.backend = "pettingzoo" (DESIGN.md, "Turns"): only the seat to move has a valid
row, a seat's reward is what it collected since its own last move, the end of a game gives every seat its final
transition (the loser's last move gets the loss and the done), no illegal move is ever sent, one policy plays
every seat, and parallel envs keep their rows."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from shell.api import train
from shell.config import load_config
from shell.envs import Rows, make_lanes
from shell.errors import ConfigError
from shell.runner import Trainer

from .turn_games import WIN, Duel

DUEL = "tests.integration.turn_games"
BASE = {"env.backend": "pettingzoo", "env.id": DUEL, "env.num_envs": 2, "ppo.num_steps": 10,
        "ppo.num_minibatches": 2, "ppo.update_epochs": 2, "policy.hidden_sizes": [16], "run.eval_episodes": 2,
        "run.total_timesteps": 40, "run.loggers": []}


def config(**overrides):
    return load_config(None, {**BASE, **overrides})


# what each seat's move earns in a game of length 5 (tests/integration/turn_games.py): seat_0 moves at k = 1, 3, 5
# and wins; seat_1 moves at k = 2, 4 and loses
EARNED = {"seat_0": [0.5 + 2, 0.5 + 4, 0.5 + WIN], "seat_1": [0.5 + 3, 0.5 + 5 - WIN]}


def discounted(rewards: list[float], gamma: float) -> float:
    return sum(gamma ** j * r for j, r in enumerate(rewards))


def legal_actions(rows: Rows) -> torch.Tensor:
    """The first legal action of every row (action 1 is always legal for the mover)."""
    return rows.action_mask.int().argmax(dim=1)


def test_only_the_mover_acts_and_rewards_arrive_when_the_seat_is_next_to_move():
    """Rows [seat_0, seat_1] per copy: the mover alone is valid; a seat's reward is paid at the step after which it
    is to move again (or at the game's end, to every seat), so the steps between its moves hold what it collected."""
    env = make_lanes(config().env, torch.device("cpu"), policy=config().policy)
    try:
        (group, spec), = env.lanes.items()
        assert spec.turns and spec.agents == ["seat_0", "seat_1"] and (spec.num_envs, env.copies) == (4, 2)
        rows = env.reset(seed=0)[group]
        # the reward each step pays [seat_0, seat_1], per the module doc of Duel
        paid = [[0.0, 1.0], [2.5, 0.0], [0.0, 3.5], [4.5, 0.0], [0.5 + WIN, 0.5 + 5 - WIN]]
        for t in range(10):
            k = t % 5
            mover = k % 2
            assert rows.valid.view(2, 2).tolist() == [[mover == 0, mover == 1]] * 2, t
            # the mover's mask from its observation; a seat whose turn it is not: all true (its action is ignored)
            assert rows.action_mask.view(2, 2, 3)[:, mover].tolist() == [[k % 2 == 1, True, True]] * 2
            assert rows.action_mask.view(2, 2, 3)[:, 1 - mover].all()
            step = env.step({group: legal_actions(rows)})[group]
            assert step.reward.view(2, 2).tolist() == [paid[k]] * 2, t
            assert step.terminated.view(2, 2).tolist() == [[k == 4, k == 4]] * 2
            assert not step.truncated.any() and step.ended.tolist() == [k == 4] * 2
            rows = Rows(step.obs, step.valid, step.action_mask)
    finally:
        env.close()


@pytest.mark.parametrize("num_steps", [10, 7])
def test_the_rollout_gives_each_seat_its_own_transitions(tmp_path, num_steps):
    """lambda = 1: each move's return is what its seat collected from that move to the game's end, discounted by
    gamma = 0.5 once per move of the seat (not per step of the game); the loser's last move returns the loss and
    is done (no bootstrap). Only the movers' rows are stored as valid, and a move whose outcome falls after the
    rollout's end leaves the update."""
    cfg = config(**{"ppo.gamma": 0.5, "ppo.gae_lambda": 1.0, "ppo.num_steps": num_steps})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        rows = trainer.env.reset(seed=0)
        trainer.lanes.restart(trainer.env)
        trainer.collect(rows)
        storage = trainer.lanes.only.storage
        valid = storage.valid.view(num_steps, 2, 2)  # [T, copy, seat]
        returns = storage.returns.view(num_steps, 2, 2)
        # game 1 (steps 0-4) is over in both rollouts: every move of it has its exact Monte-Carlo return
        for t, (seat, earned) in enumerate([(0, EARNED["seat_0"]), (1, EARNED["seat_1"]), (0, EARNED["seat_0"][1:]),
                                            (1, EARNED["seat_1"][1:]), (0, EARNED["seat_0"][2:])]):
            assert valid[t, :, seat].all() and not valid[t, :, 1 - seat].any(), t
            assert returns[t, :, seat].tolist() == pytest.approx([discounted(earned, 0.5)] * 2), t
        # the move that lost: its return is the loss, its advantage the loss minus its value (done: no bootstrap)
        lost = storage.advantages.view(num_steps, 2, 2)[3, :, 1] + storage.values.view(num_steps, 2, 2)[3, :, 1]
        assert lost.tolist() == pytest.approx([0.5 + 5 - WIN] * 2)
        if num_steps == 10:  # game 2 is over too
            assert valid[5:].sum() == 10
            assert returns[5:].flatten()[valid[5:].flatten()].tolist() == pytest.approx(
                returns[:5].flatten()[valid[:5].flatten()].tolist())
        else:  # steps 5 (seat_0) and 6 (seat_1) of game 2; seat_0 is to move after the rollout, seat_1 is not
            assert valid[5, :, 0].all() and not valid[5, :, 1].any()
            assert not valid[6].any()  # seat_1's move: its outcome comes after the rollout
    finally:
        trainer.env.close()


def test_a_game_cut_by_max_episode_steps_truncates_every_seat_with_what_it_collected():
    cfg = config(**{"env.max_episode_steps": 3})
    env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    try:
        (group, _), = env.lanes.items()
        rows = env.reset(seed=0)[group]
        for _ in range(3):
            step = env.step({group: legal_actions(rows)})[group]
            rows = Rows(step.obs, step.valid, step.action_mask)
        # move 3 (seat_0's) is the last: seat_0 collected 0.5 since its move, seat_1 0.5 + 3 since its move
        assert step.reward.view(2, 2).tolist() == [[0.5, 3.5]] * 2
        assert step.truncated.all() and not step.terminated.any() and step.ended.all()
        assert step.final_obs is not None  # each seat's own last observation, for its bootstrap
        assert rows.valid.view(2, 2).tolist() == [[True, False]] * 2  # a new game: seat_0 to move
    finally:
        env.close()


class StrictDuel(Duel):
    """Counts the moves it was sent (every one is checked by Duel.step, which raises on an illegal one)."""

    moves = 0

    def step(self, action) -> None:
        if not (self.terminations[self.agent_selection] or self.truncations[self.agent_selection]):
            type(self).moves += 1
        super().step(action)


def test_no_illegal_move_is_ever_sent_in_training_or_by_the_loaded_policy(tmp_path):
    """Duel raises on an illegal move (action 0 is illegal at every other move): a run that samples from an
    untrained policy for hundreds of moves, its evaluation, and its loaded policy playing PettingZoo's own AEC loop
    never send one. One policy (one lane) plays both seats."""
    StrictDuel.moves = 0
    cfg = config(**{"run.total_timesteps": 400, "env.num_envs": 4})
    result = train(config=cfg, env=lambda: StrictDuel(), run_dir=tmp_path / "run", progress=False)
    assert StrictDuel.moves >= 400
    assert result.summary["eval_episodes"] == 2
    policy = result.policy
    assert set(policy.groups) == {"seat"} and policy.groups["seat"] == ["seat_0", "seat_1"]
    game = Duel()
    for seed in range(3):
        game.reset(seed=seed)
        for agent in game.agent_iter():
            obs, _, term, trunc, _ = game.last()
            game.step(None if term or trunc else policy({agent: obs})[agent])  # raises on an illegal move


def test_tictactoe_never_receives_an_illegal_move(tmp_path):
    """PettingZoo's tictactoe_v3 (its raw env, which marks an occupied square over instead of refusing) with a
    check that raises on an occupied square: a short self-play run sends only legal moves."""
    from pettingzoo.classic.tictactoe.tictactoe import raw_env

    class StrictTicTacToe(raw_env):
        sent = 0

        def step(self, action):
            if not (self.terminations[self.agent_selection] or self.truncations[self.agent_selection]):
                if self.board.squares[int(action)] != 0:
                    raise ValueError(f"illegal move {action} on {self.board.squares}")
                type(self).sent += 1
            super().step(action)

    cfg = config(**{"env.id": "pettingzoo.classic.tictactoe_v3", "env.num_envs": 8, "ppo.num_steps": 64,
                    "run.total_timesteps": 1024, "run.eval_episodes": 4})
    result = train(config=cfg, env=StrictTicTacToe, run_dir=tmp_path / "run", progress=False)
    assert StrictTicTacToe.sent >= 1024
    assert result.summary["env_steps"] == 1024
    assert result.policy.agent.action_mask_source == "obs"


def test_every_tictactoe_move_returns_its_seats_outcome_and_sees_the_board_from_its_side(tmp_path):
    """PettingZoo's tic-tac-toe, gamma = lambda = 1: replaying each copy's stored moves on a board of our own, every
    move of a finished game returns its seat's outcome (+1 win, -1 loss, 0 draw; the loser's last move included,
    done, as the game ends at the winner's move), and its observation is the board seen by the mover (plane 0 its
    own marks, plane 1 the other seat's)."""
    from .game_bots import LINES

    cfg = config(**{"env.id": "pettingzoo.classic.tictactoe_v3", "env.num_envs": 4, "ppo.num_steps": 40,
                    "ppo.gamma": 1.0, "ppo.gae_lambda": 1.0, "ppo.num_minibatches": 1})
    trainer = Trainer(cfg, tmp_path / "run", progress=False)
    try:
        trainer.lanes.restart(trainer.env)
        trainer.collect(trainer.env.reset(seed=0))
        storage = trainer.lanes.only.storage
        obs = storage.obs["observation"].view(40, 4, 2, 3, 3, 2)
        valid, dones = storage.valid.view(40, 4, 2), storage.dones.view(40, 4, 2)
        returns, actions = storage.returns.view(40, 4, 2), storage.raw_actions.view(40, 4, 2)
        checked = 0
        for copy in range(4):
            board, moves = [0] * 9, []  # 1: player_1's mark, 2: player_2's
            # up to the last finished game (the moves of the game the rollout cuts are not all stored as valid)
            for t in range(int(dones[:, copy, 0].nonzero().max()) + 1):
                seat = 0 if valid[t, copy, 0] else 1
                assert valid[t, copy, seat] and not valid[t, copy, 1 - seat]  # one mover, and it is the seat's turn
                seen = obs[t, copy, seat].flatten(0, 1)
                assert [i for i in range(9) if seen[i, 0]] == [i for i in range(9) if board[i] == seat + 1]
                assert [i for i in range(9) if seen[i, 1]] == [i for i in range(9) if board[i] == 2 - seat]
                square = int(actions[t, copy, seat])
                board[square] = seat + 1
                moves.append((t, seat))
                won = any(board[a] == board[b] == board[c] == seat + 1 for a, b, c in LINES)
                if won or all(board):
                    assert dones[t, copy].all()  # both seats' last transitions end here
                    for u, mover in moves:
                        outcome = 0.0 if not won else (1.0 if mover == seat else -1.0)
                        assert float(returns[u, copy, mover]) == pytest.approx(outcome, abs=1e-5), (copy, u, mover)
                        checked += 1
                    board, moves = [0] * 9, []
                else:
                    assert not dones[t, copy].any()
        assert checked >= 4 * 20  # at least 4 games finished in each copy's 40 moves
    finally:
        trainer.env.close()


def test_tictactoe_from_its_module_id_is_turn_based():
    cfg = config(**{"env.id": "pettingzoo.classic.tictactoe_v3"})
    env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    try:
        (group, spec), = env.lanes.items()
        assert spec.turns and spec.agents == ["player_1", "player_2"] and group == "player"
        rows = env.reset(seed=0)[group]
        assert rows.valid.tolist() == [True, False, True, False]
        step = env.step({group: torch.tensor([4, 0, 4, 0])})[group]  # the centre; the waiting rows' 0 is ignored
        assert step.valid.tolist() == [False, True, False, True]
        assert step.action_mask.view(2, 2, 9)[:, 1].int().tolist() == [[1, 1, 1, 1, 0, 1, 1, 1, 1]] * 2
    finally:
        env.close()


def test_async_copies_play_the_same_games_as_sync():
    """env.vectorization_mode = "async" (the copies in worker processes) steps the same games, bit for bit."""
    outs = []
    for mode in ("sync", "async"):
        cfg = config(**{"env.num_envs": 4, "env.vectorization_mode": mode})
        env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
        try:
            (group, _), = env.lanes.items()
            rows, seen = env.reset(seed=3)[group], []
            for _ in range(12):
                step = env.step({group: legal_actions(rows)})[group]
                rows = Rows(step.obs, step.valid, step.action_mask)
                seen.append((step.reward, step.valid, step.terminated, step.action_mask, step.obs["observation"]))
            outs.append(seen)
        finally:
            env.close()
    for a, b in zip(*outs, strict=True):
        assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))


def test_a_module_with_neither_api_is_refused_in_one_line(tmp_path):
    with pytest.raises(ConfigError, match="neither parallel_env") as info:
        train(config=config(**{"env.id": "json"}), run_dir=tmp_path / "run", progress=False)
    assert "\n" not in str(info.value)


def test_simple_spread_rows_are_those_of_its_parallel_env():
    """The shipped parallel config keeps its rows: each row is its agent's own observation (with its one-hot id)
    and reward from mpe2's parallel_env, every row valid, no turns."""
    from mpe2 import simple_spread_v3

    cfg = load_config("simple-spread", {"env.num_envs": 2, "env.vectorization_mode": "sync"})
    env = make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    refs = [simple_spread_v3.parallel_env(**cfg.env.kwargs) for _ in range(2)]
    try:
        (group, spec), = env.lanes.items()
        assert not spec.turns and spec.agents == refs[0].possible_agents and spec.num_envs == 6
        rows = env.reset(seed=[11, 12])[group]
        ref_obs = [ref.reset(seed=seed)[0] for ref, seed in zip(refs, [11, 12], strict=True)]
        gen = np.random.default_rng(0)
        ids = np.eye(3, dtype=np.float32)
        for t in range(30):  # past the end of an episode (max_cycles = 25): a reset inside
            expected = np.concatenate([np.concatenate([o[a], ids[j]]) for o in ref_obs
                                       for j, a in enumerate(spec.agents)]).reshape(6, -1)
            assert np.array_equal(rows.obs.numpy(), expected), t
            assert rows.valid.all()
            actions = gen.integers(0, 5, 6)
            step = env.step({group: torch.as_tensor(actions)})[group]
            rewards = []
            for i, ref in enumerate(refs):
                obs_i, rew, *_ = ref.step({a: int(actions[i * 3 + j]) for j, a in enumerate(spec.agents)})
                rewards += [rew[a] for a in spec.agents]
                if not ref.agents:
                    obs_i, _ = ref.reset(seed=None)
                ref_obs[i] = obs_i
            assert np.array_equal(step.reward.numpy(), np.array(rewards, dtype=np.float32)), t
            rows = Rows(step.obs, step.valid, step.action_mask)
    finally:
        env.close()
        for ref in refs:
            ref.close()


def test_a_turn_based_run_is_evaluated_seat_by_seat_against_random_legal_moves(tmp_path):
    """The evaluation plays the policy in each seat in turn against uniform-random legal moves (Duel raises on an
    illegal one), and reports the policy's own score: Duel's last mover (seat_0) always wins, whatever is played."""
    StrictDuel.moves = 0
    cfg = config(**{"run.eval_episodes": 6})
    result = train(config=cfg, env=lambda: StrictDuel(), run_dir=tmp_path / "run", progress=False)
    summary = result.summary
    assert summary["eval_vs"]["random"] == {"seat_0": {"win": 1.0, "draw": 0.0, "loss": 0.0, "games": 3, "distinct": 3},
                                         "seat_1": {"win": 0.0, "draw": 0.0, "loss": 1.0, "games": 3, "distinct": 3}}
    seat_0, seat_1 = sum(EARNED["seat_0"]), 1.0 + sum(EARNED["seat_1"])  # 1 before its first move is its too
    assert summary["eval_return_mean"] == pytest.approx((seat_0 + seat_1) / 2)
    assert "eval_return_per_agent" not in summary


def test_a_classic_game_without_pygame_names_the_games_extra(monkeypatch):
    import sys

    for name in [m for m in sys.modules if m.startswith("pettingzoo.classic")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pygame", None)  # import pygame raises ModuleNotFoundError
    cfg = config(**{"env.id": "pettingzoo.classic.connect_four_v3"})
    with pytest.raises(ConfigError, match=r"needs pygame .*\[games\]") as info:
        make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize(("env_id", "extra"), [("pettingzoo.classic.tictactoe_v3", "games"),
                                               ("pettingzoo.classic.connect_four_v3", "games"),
                                               ("pettingzoo.butterfly.pistonball_v6", "multiagent"),
                                               ("mpe2.simple_spread_v3", "multiagent")])
def test_a_missing_package_names_the_extra_that_brings_all_the_env_needs(monkeypatch, env_id, extra):
    """Without pettingzoo (or mpe2), a classic game names the games extra (pettingzoo and pygame), so that one
    install is enough; the parallel envs name the multiagent extra."""
    from shell.envs.pettingzoo import backend

    top = env_id.split(".")[0]

    def absent(name, *args):  # what importing a module of an uninstalled package raises
        raise ModuleNotFoundError(f"No module named {top!r}", name=top)

    monkeypatch.setattr(backend, "importlib", type("Importlib", (), {"import_module": staticmethod(absent)}))
    cfg = config(**{"env.id": env_id})
    with pytest.raises(ConfigError, match=rf"needs the {top} package; run: .*\[{extra}\]") as info:
        make_lanes(cfg.env, torch.device("cpu"), policy=cfg.policy)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("fmt", ["onnx", "pt2"])
def test_the_exported_file_plays_from_the_games_own_observations_as_the_policy_does(tmp_path, fmt):
    """A tic-tac-toe run exported to one file: its inputs are the observation and the mask, and
    ``observation_inputs`` builds them from PettingZoo's observation as it comes (``{"observation": int8,
    "action_mask": int8}``, the mask last, as bool). Driving the game, the file's move is the loaded policy's,
    and legal, in both seats and every position reached."""
    from pettingzoo.classic import tictactoe_v3

    from shell.export import export_policy, load_exported, observation_inputs
    from shell.inference import load_policy

    cfg = config(**{"env.id": "pettingzoo.classic.tictactoe_v3", "env.num_envs": 4, "ppo.num_steps": 32,
                    "run.total_timesteps": 256})
    train(config=cfg, run_dir=tmp_path / "run", progress=False)
    result = export_policy(tmp_path / "run", fmt, tmp_path / f"policy.{fmt}")
    assert result.input_names == ["observation", "action_mask"]
    run, policy, game = load_exported(result.path, fmt), load_policy(tmp_path / "run"), tictactoe_v3.env()
    moves = 0
    for seed in range(6):
        game.reset(seed=seed)
        for agent in game.agent_iter():
            obs, _, term, trunc, _ = game.last()
            if term or trunc:
                game.step(None)
                continue
            batch = {key: value[None] for key, value in obs.items()}
            inputs = observation_inputs(batch, game.observation_space(agent))
            assert [x.dtype for x in inputs] == [np.float32, np.bool_] and inputs[1].shape == (1, 9)
            action = int(np.asarray(run(*inputs))[0])
            assert action == int(policy({agent: obs})[agent]) and obs["action_mask"][action] == 1
            game.step(action)
            moves += 1
    assert moves >= 30
