"""OpenSpiel games on env.backend = "openspiel" (issue 62): the backend plays them through the PettingZoo turns (the
seats player_0 and player_1, a seat's information-state tensor as its observation, its legal moves as the mask, the
deals from the run's seeded streams), policies give their action probabilities (``probs``), and the exact
exploitability of a policy is checked against a best response written here."""

from __future__ import annotations

import io
import itertools
import json

import numpy as np
import pytest
import torch

pyspiel = pytest.importorskip("pyspiel")

from shell.api import train  # noqa: E402
from shell.config import load_config  # noqa: E402
from shell.envs import Rows, make_lanes  # noqa: E402
from shell.envs.openspiel import game_env, load_game  # noqa: E402
from shell.errors import ConfigError  # noqa: E402
from shell.games.exploitability import exact_exploitability, information_states, to_openspiel_policy  # noqa: E402
from shell.games.play import play  # noqa: E402
from shell.inference import AgentsPolicy, Policy, agent_for_spaces, load_policy  # noqa: E402
from shell.observations import ACTOR_KEY, CRITIC_KEY  # noqa: E402

from .test_opponents import cli  # noqa: E402

SHORT = {"env.num_envs": 8, "ppo.num_steps": 32, "ppo.update_epochs": 2, "run.total_timesteps": 4 * 8 * 32,
         "run.eval_episodes": 4, "run.loggers": []}
CPU = torch.device("cpu")


def kuhn_config(**overrides):
    return load_config("kuhn", {**SHORT, **overrides})


@pytest.fixture(scope="module")
def kuhn_run(tmp_path_factory):
    run_dir = tmp_path_factory.mktemp("kuhn") / "run"
    return train(config=kuhn_config(), run_dir=run_dir, progress=False)


def copies_states(env) -> list:
    """Each copy's pyspiel state (the lane env's copies are TurnGames over the AEC adapter)."""
    return [turn_game.env.spiel_state for turn_game in env.copy_envs.envs]


# ----------------------------------------------------------------------------- training
def test_kuhn_trains_for_a_few_updates_through_shell_train(kuhn_run):
    summary = kuhn_run.summary
    assert summary["env_steps"] == 4 * 8 * 32 and summary["updates"] == 4
    rows = (kuhn_run.run_dir / "metrics.csv").read_text().strip().splitlines()
    assert len(rows) == 1 + 4
    assert set(summary["eval_vs"]["random"]) == {"player_0", "player_1"}  # each seat played against random
    versions = json.loads((kuhn_run.run_dir / "versions.json").read_text())
    assert versions["open_spiel"] == "2.0.2"
    policy = kuhn_run.policy
    assert isinstance(policy, AgentsPolicy) and policy.groups == {"player": ["player_0", "player_1"]}


# ----------------------------------------------------------------------------- refusals
@pytest.mark.parametrize("game, kwargs, words", [
    ("matrix_rps", {}, "simultaneous-move"),
    ("goofspiel", {}, "simultaneous-move"),
    ("kuhn_poker", {"players": 3}, "has 3 players"),
    ("kuhn_pokr", {}, "did you mean 'kuhn_poker'"),
    ("kuhn_poker", {"cards": 4}, "has no parameter 'cards'"),
    ("kuhn_poker", {"players": "two"}, "takes an int"),
    ("kuhn_poker(players=2)", {}, "env.kwargs"),
])
def test_games_the_backend_cannot_play_are_refused_in_one_line(tmp_path, game, kwargs, words):
    cfg = kuhn_config(**{"env.id": game, "env.kwargs": kwargs})
    with pytest.raises(ConfigError) as err:
        train(config=cfg, run_dir=tmp_path / "run", progress=False)
    assert words in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_a_factory_is_refused_in_one_line_the_games_come_from_env_id(tmp_path):
    with pytest.raises(ConfigError) as err:
        train(config=kuhn_config(), env=lambda: load_game("kuhn_poker"), run_dir=tmp_path / "run", progress=False)
    assert "makes its games from env.id" in str(err.value) and "\n" not in str(err.value)


def test_the_cli_refuses_a_simultaneous_game_with_exit_code_2_and_one_line(tmp_path):
    out = cli("--config", "kuhn", "--set", "env.id=goofspiel", "--run-dir", str(tmp_path / "run"))
    assert out.returncode == 2
    last = out.stderr.strip().splitlines()[-1]
    assert "goofspiel" in last and "simultaneous-move" in last and "Traceback" not in out.stderr


# ----------------------------------------------------------------------------- the seats, chance, observations
def deals(seed, episodes: int = 30) -> list[str]:
    """The deals of ``episodes`` games of one copy, reset once with ``seed`` and then without one (as the copies
    are): the chance outcomes of each game's history."""
    env = game_env(load_game("kuhn_poker"))
    env.reset(seed=seed)
    out = []
    for _ in range(episodes):
        out.append(env.spiel_state.history()[:2])
        while not env.spiel_state.is_terminal():
            env.step(0)  # pass, pass: a showdown
        env.reset()
    return out


def test_chance_nodes_repeat_with_the_same_seed_and_differ_with_another():
    assert deals(7) == deals(7)
    assert deals(7) != deals(8)
    assert len({tuple(d) for d in deals(7)}) > 1  # the deals vary within the stream
    # through the lanes, as a run resets its copies (each copy its own seed of run.seed's streams)
    cfg = kuhn_config(**{"env.num_envs": 4})

    def lane_deals(seeds):
        env = make_lanes(cfg.env, CPU, policy=cfg.policy)
        try:
            env.reset(seed=seeds)
            return [state.history()[:2] for state in copies_states(env)]
        finally:
            env.close()

    assert lane_deals([1, 2, 3, 4]) == lane_deals([1, 2, 3, 4])
    draws = [lane_deals([s, s + 1, s + 2, s + 3]) for s in range(0, 40, 4)]
    assert len({tuple(map(tuple, d)) for d in draws}) > 1


@pytest.mark.parametrize("game", ["kuhn_poker", "leduc_poker", "tic_tac_toe"])
def test_a_seats_observation_is_pyspiels_tensor_and_its_mask_the_legal_moves(game):
    """Every row that acts observes its seat's information_state_tensor (tic-tac-toe has none: its
    observation_tensor), unchanged; its mask is legal_actions_mask; rewards are paid at the end only, zero-sum."""
    cfg = kuhn_config(**{"env.id": game, "env.num_envs": 3, "policy.critic": "local"})  # rows of the seat alone
    env = make_lanes(cfg.env, CPU, policy=cfg.policy)
    generator = torch.Generator().manual_seed(0)
    try:
        (group, spec), = env.lanes.items()
        assert spec.turns and spec.agents == ["player_0", "player_1"] and group == "player"
        size = load_game(game).information_state_tensor_size() if game != "tic_tac_toe" \
            else load_game(game).observation_tensor_size()
        assert spec.observation_space.shape == (size,)
        rows = env.reset(seed=[5, 6, 7])[group]
        collected = np.zeros((3, 2))
        ended = 0
        for _ in range(200):
            for i, state in enumerate(copies_states(env)):
                player = state.current_player()
                assert rows.valid.view(3, 2)[i].tolist() == [player == 0, player == 1]
                tensor = state.information_state_tensor(player) if game != "tic_tac_toe" \
                    else state.observation_tensor(player)
                assert torch.equal(rows.obs.view(3, 2, -1)[i, player], torch.tensor(tensor, dtype=torch.float32))
                assert rows.action_mask.view(3, 2, -1)[i, player].tolist() == \
                    [bool(m) for m in state.legal_actions_mask(player)]
            finals = [state.clone() for state in copies_states(env)]
            legal = rows.action_mask.float()
            action = torch.multinomial(legal, 1, generator=generator).squeeze(1)
            step = env.step({group: action})[group]
            reward = step.reward.view(3, 2).numpy()
            for i, state in enumerate(finals):
                if step.ended[i]:
                    # the copy's game is over: replay the move to read its returns, paid now and only now
                    mover = state.current_player()
                    state.apply_action(int(action.view(3, 2)[i, mover]))
                    while state.is_chance_node():  # not reached in these games: their chance comes first
                        state.apply_action(state.chance_outcomes()[0][0])
                    assert state.is_terminal()
                    np.testing.assert_allclose(collected[i] + reward[i], state.returns())
                    assert sum(state.returns()) == 0 and step.terminated.view(3, 2)[i].all()
                    collected[i] = 0
                    ended += 1
                else:
                    assert not reward[i].any()  # nothing is paid before the end
                    collected[i] += reward[i]
            rows = Rows(step.obs, step.valid, step.action_mask)
        assert ended >= 3
    finally:
        env.close()


# ----------------------------------------------------------------------------- probs
def test_a_state_critic_sees_both_seats_information_and_the_actor_its_own(tmp_path):
    """``policy.critic = "state"``: PettingZoo's ``state()`` of the game is both seats' information states
    concatenated (both cards in Kuhn), the critic's input; the actor's rows are each seat's own, and the policy that
    load_policy gives (and the exploitability) read those only."""
    cfg = kuhn_config(**{"policy.critic": "state", "env.num_envs": 3})
    env = make_lanes(cfg.env, CPU, policy=cfg.policy)
    try:
        (group,) = env.lanes
        rows = env.reset(seed=[5, 6, 7])[group]
        size = load_game("kuhn_poker").information_state_tensor_size()
        for i, state in enumerate(copies_states(env)):
            both = np.concatenate([state.information_state_tensor(p) for p in (0, 1)]).astype(np.float32)
            for seat in (0, 1):
                row = rows.obs[ACTOR_KEY].view(3, 2, -1)[i, seat]
                assert torch.equal(row, torch.tensor(state.information_state_tensor(seat), dtype=torch.float32))
                critic = rows.obs[CRITIC_KEY].view(3, 2, -1)[i, seat]
                assert torch.equal(critic[:2 * size], torch.from_numpy(both))
                assert critic[2 * size:].tolist() == [float(seat == 0), float(seat == 1)]  # the seat's one-hot
    finally:
        env.close()
    result = train(config=cfg, run_dir=tmp_path / "run", progress=False)
    for average, field in ((False, "exploitability"), (None, "average_exploitability")):  # kuhn.toml's average
        figure = exact_exploitability(load_policy(result.run_dir, average=average), "kuhn_poker")
        assert figure.exploitability == pytest.approx(result.summary[field], abs=1e-6)


def small_policy(action_space, obs_size: int = 6, masked: bool = True) -> Policy:
    from gymnasium import spaces

    cfg = load_config(None, {"policy.hidden_sizes": [16]})
    torch.manual_seed(0)
    agent = agent_for_spaces(spaces.Box(-1, 1, (obs_size,), np.float32), action_space, cfg)
    for p in agent.actor.parameters():  # far from uniform, so that the mask matters
        p.data.normal_(0.0, 1.0)
    agent.action_mask_source = "info" if masked else None
    return Policy(agent.eval(), agent.observation_space)


def test_probs_sum_to_one_are_exactly_zero_on_illegal_moves_and_their_argmax_is_the_action():
    from gymnasium import spaces

    policy = small_policy(spaces.Discrete(5))
    rng = np.random.default_rng(0)
    obs = rng.uniform(-1, 1, (64, 6)).astype(np.float32)
    mask = rng.random((64, 5)) < 0.5
    mask[np.arange(64), rng.integers(0, 5, 64)] = True
    probs = policy.probs(obs, action_mask=mask)
    assert probs.shape == (64, 5) and probs.dtype == np.float32
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, atol=1e-6)
    assert (probs[~mask] == 0.0).all() and (probs[mask] > 0).all()
    assert (probs.argmax(axis=1) == policy(obs, action_mask=mask)).all()
    one = policy.probs(obs[3], action_mask=mask[3])
    assert one.shape == (5,) and np.allclose(one, probs[3])
    with pytest.raises(ValueError, match="pass action_mask"):
        policy.probs(obs)  # a masked policy needs its mask, as to act


@pytest.mark.parametrize("space, name", [("box", "Box"), ("multi", "MultiDiscrete")])
def test_probs_refuse_an_action_space_other_than_discrete_in_one_line(space, name):
    from gymnasium import spaces

    action_space = spaces.Box(-1, 1, (2,), np.float32) if space == "box" else spaces.MultiDiscrete([2, 3])
    policy = small_policy(action_space, masked=False)
    with pytest.raises(ValueError) as err:
        policy.probs(np.zeros((2, 6), np.float32))
    assert "probs needs a Discrete action space" in str(err.value) and name in str(err.value)
    assert "\n" not in str(err.value)


def test_the_multi_agent_policy_gives_probs_for_one_observation_or_a_batch_per_agent(kuhn_run):
    policy = load_policy(kuhn_run.run_dir)
    game = load_game("kuhn_poker")
    states = list(information_states(game).values())
    by_seat = {p: [s for s in states if s.current_player() == p] for p in (0, 1)}
    obs = {f"player_{p}": np.stack([np.asarray(s.information_state_tensor(p), np.float32) for s in by_seat[p]])
           for p in (0, 1)}
    masks = {f"player_{p}": np.stack([s.legal_actions_mask(p) for s in by_seat[p]]).astype(bool) for p in (0, 1)}
    probs = policy.probs(obs, action_mask=masks)
    assert {a: p.shape for a, p in probs.items()} == {"player_0": (6, 2), "player_1": (6, 2)}
    for agent in probs:
        np.testing.assert_allclose(probs[agent].sum(axis=1), 1.0, atol=1e-6)
        one = policy.probs({agent: obs[agent][2]}, action_mask={agent: masks[agent][2]})[agent]
        assert one.shape == (2,) and np.allclose(one, probs[agent][2], atol=1e-7)
        action = policy({agent: obs[agent][2]}, action_mask={agent: masks[agent][2]})[agent]
        assert action == probs[agent][2].argmax()
    with pytest.raises(ValueError, match="agent 'player_0': the observation has shape"):
        policy.probs({"player_0": np.zeros((2, 3), np.float32)}, action_mask={"player_0": np.ones((2, 2), bool)})


def test_the_openspiel_policy_is_exactly_zero_on_illegal_moves_at_every_information_state_of_leduc():
    from gymnasium import spaces

    game = load_game("leduc_poker")
    policy = small_policy(spaces.Discrete(game.num_distinct_actions()), game.information_state_tensor_size())
    table = to_openspiel_policy(policy, game)
    assert len(table.state_lookup) == 936
    legal = table.legal_actions_mask.astype(bool)
    assert (table.action_probability_array[~legal] == 0.0).all()
    np.testing.assert_allclose(table.action_probability_array.sum(axis=1), 1.0, atol=1e-12)
    # a row is the policy's own probs of that state's tensor and mask
    state = table.states[100]
    player = state.current_player()
    direct = policy.probs(np.asarray(state.information_state_tensor(player), np.float32),
                          action_mask=np.asarray(state.legal_actions_mask(player), bool))
    np.testing.assert_allclose(table.action_probability_array[100], direct, atol=1e-6)


# ----------------------------------------------------------------------------- exploitability
def uniform_agent():
    """An agent of the kuhn config whose logits are all 0: the uniform random policy over the legal moves."""
    from gymnasium import spaces

    game = load_game("kuhn_poker")
    cfg = kuhn_config()
    agent = agent_for_spaces(spaces.Box(-np.inf, np.inf, (game.information_state_tensor_size(),), np.float32),
                             spaces.Discrete(2), cfg)
    for p in agent.actor.parameters():
        p.data.zero_()
    agent.action_mask_source = "info"
    return agent.eval()


def test_the_uniform_random_policy_of_kuhn_has_the_known_exploitability():
    figure = exact_exploitability(uniform_agent(), "kuhn_poker")
    assert abs(figure.nash_conv - 11 / 12) < 1e-9  # 0.9167
    assert abs(figure.exploitability - 11 / 24) < 1e-9  # 0.4583
    assert figure.information_states == 12


# Kuhn poker written out here, independent of OpenSpiel's tree: cards 0 < 1 < 2, one chip ante each; action 0 passes
# (checks or folds), 1 bets (or calls); player 0 acts first. A seat's information state is its card and the history
# ("1pb"), as OpenSpiel names it.
TERMINAL = {"pp": 1, "bb": 2, "pbb": 2, "bp": None, "pbp": None}  # showdown stakes; None: a fold
DECISIONS = {"": 0, "p": 1, "b": 1, "pb": 0}  # history -> the player to act


def kuhn_utility(cards: tuple[int, int], history: str) -> float:
    """Player 0's payoff at a terminal history."""
    if history == "bp":
        return 1.0  # player 1 folded
    if history == "pbp":
        return -1.0  # player 0 folded
    stake = TERMINAL[history]
    return stake if cards[0] > cards[1] else -stake


def kuhn_value(strategies, cards: tuple[int, int], history: str = "") -> float:
    """Player 0's expected payoff below ``history``; ``strategies[p](info_state) -> [P(pass), P(bet)]``."""
    if history in TERMINAL:
        return kuhn_utility(cards, history)
    player = DECISIONS[history]
    probs = strategies[player](f"{cards[player]}{history}")
    return sum(p * kuhn_value(strategies, cards, history + "pb"[a]) for a, p in enumerate(probs) if p > 0)


def expected(strategies) -> float:
    deals_ = list(itertools.permutations(range(3), 2))
    return sum(kuhn_value(strategies, cards) for cards in deals_) / len(deals_)


def nash_conv_by_hand(table) -> float:
    """NashConv of a tabular policy of Kuhn, by brute force: each seat's best response is the best of its 64 pure
    strategies (a move at each of its 6 information states) against the policy in the other seat."""
    def policy(info_state: str):
        return table.action_probability_array[table.state_lookup[info_state]]

    info_sets = {0: [f"{c}{h}" for c in range(3) for h in ("", "pb")],
                 1: [f"{c}{h}" for c in range(3) for h in ("p", "b")]}
    on_policy = expected([policy, policy])  # player 0's value; player 1's is its negative
    best = []
    for seat in (0, 1):
        values = []
        for moves in itertools.product((0, 1), repeat=len(info_sets[seat])):
            pure = dict(zip(info_sets[seat], moves, strict=True))

            def strategy(info_state, pure=pure):
                return [1.0 - pure[info_state], float(pure[info_state])]

            pair = [strategy, policy] if seat == 0 else [policy, strategy]
            value = expected(pair)
            values.append(value if seat == 0 else -value)
        best.append(max(values))
    return (best[0] - on_policy) + (best[1] + on_policy)


def scrambled_kuhn_agent():
    agent = uniform_agent()
    torch.manual_seed(3)
    for p in agent.actor.parameters():
        p.data.normal_(0.0, 0.5)
    return agent


@pytest.mark.parametrize("which", ["trained", "scrambled", "uniform"])
def test_the_figure_on_kuhn_matches_a_best_response_written_here(kuhn_run, which):
    source = {"trained": lambda: kuhn_run.run_dir, "scrambled": scrambled_kuhn_agent, "uniform": uniform_agent}
    policy = source[which]()
    game = None if which == "trained" else "kuhn_poker"
    table = to_openspiel_policy(policy, game)
    assert sorted(table.state_lookup) == sorted([f"{c}{h}" for c in range(3) for h in ("", "pb", "p", "b")])
    figure = exact_exploitability(policy, game)
    by_hand = nash_conv_by_hand(table)
    assert abs(figure.nash_conv - by_hand) < 1e-9, (figure, by_hand)
    assert abs(figure.exploitability - by_hand / 2) < 1e-9
    if which == "scrambled":  # far from uniform, and so a different figure
        assert abs(by_hand - 11 / 12) > 0.05
    if which == "uniform":
        assert abs(by_hand - 11 / 12) < 1e-9


def test_a_game_over_the_size_is_refused_in_one_line():
    game = load_game("leduc_poker")
    with pytest.raises(ConfigError) as err:
        information_states(game, max_states=100)
    assert "more than 100 information states" in str(err.value) and "\n" not in str(err.value)
    with pytest.raises(ConfigError, match="more than 1,000 histories"):
        information_states(game, max_histories=1_000)
    with pytest.raises(ConfigError, match="simultaneous-move"):
        exact_exploitability(uniform_agent(), "matrix_rps")


# ----------------------------------------------------------------------------- play
def test_play_shows_the_human_only_their_own_information_state(kuhn_run):
    lines: list[str] = []
    outcome = play(kuhn_run.run_dir, seat="player_1", stdin=io.StringIO("7\n1\n1\n1\n"), out=lines.append, seed=11)
    assert outcome["result"] in {"win", "loss"} and outcome["seat"] == "player_1"
    # replay the game: every view printed before a move of yours is your own information state, as OpenSpiel writes it
    env = game_env(load_game("kuhn_poker"))
    env.reset(seed=11)
    asked = 0
    for line in lines:
        if line.startswith("player_0 (agent) plays "):
            env.step(int(line.split()[3]))
        elif "\nmoves: " in line:
            assert env.spiel_state.current_player() == 1
            assert line.split("\n")[0] == env.spiel_state.information_state_string(1)  # your card and the bets, no more
            assert line.split("\n")[1] == "moves: 0 = Pass, 1 = Bet"
            asked += 1
            env.step(1)  # the first legal move typed after "7", which is refused
    assert asked == 1 and "illegal move '7'; legal moves: [0, 1]" in lines
    assert env.spiel_state.is_terminal() and "game over" in lines[-2]
    assert outcome["score"] == env.spiel_state.returns()[1]
    assert json.loads(lines[-1]) == outcome


# ----------------------------------------------------------------------------- exploitability at every evaluation
def test_every_evaluation_measures_the_exact_exploitability_in_metrics_summary_and_eval(tmp_path, kuhn_run):
    from shell.evaluation import eval_checkpoint

    run = train(config=kuhn_config(**{"run.eval_every": 2}), run_dir=tmp_path / "run", progress=False)
    lines = (run.run_dir / "metrics.csv").read_text().strip().splitlines()
    header = lines[0].split(",")
    assert header[-4:] == ["nash_conv", "exploitability", "average_nash_conv", "average_exploitability"]
    rows = [dict(zip(header, line.split(","), strict=True)) for line in lines[1:]]
    assert [r["nash_conv"] != "" for r in rows] == [False, True, False, False]  # update 2's evaluation only
    assert float(rows[1]["exploitability"]) == pytest.approx(float(rows[1]["nash_conv"]) / 2)
    exact = exact_exploitability(load_policy(run.run_dir, average=False), "kuhn_poker")  # the last policy, apart
    assert exact_exploitability(run.run_dir).exploitability == pytest.approx(  # the run's own: its average
        run.summary["average_exploitability"], abs=1e-6)
    assert run.summary["nash_conv"] == pytest.approx(exact.nash_conv, abs=1e-6)
    assert run.summary["exploitability"] == pytest.approx(exact.exploitability, abs=1e-6)
    result = eval_checkpoint(run.run_dir, episodes=4)
    assert result["exploitability"] == pytest.approx(exact.exploitability, abs=1e-6)
    assert "nash_conv" in kuhn_run.summary  # on by default
    average = exact_exploitability(load_policy(run.run_dir, average=True), "kuhn_poker")
    assert run.summary["average_exploitability"] == pytest.approx(average.exploitability, abs=1e-6)


def test_exploitability_switches_off_and_is_measured_without_evaluation_episodes(tmp_path):
    off = train(config=kuhn_config(**{"run.exploitability": False}), run_dir=tmp_path / "off", progress=False)
    assert "nash_conv" not in off.summary
    assert "nash_conv" not in (off.run_dir / "metrics.csv").read_text().splitlines()[0]
    bare = train(config=kuhn_config(**{"run.eval_episodes": 0, "run.eval_every": 0}), run_dir=tmp_path / "bare",
                 progress=False)
    assert bare.summary["eval_episodes"] == 0
    last = exact_exploitability(load_policy(bare.run_dir, average=False), "kuhn_poker")
    assert bare.summary["exploitability"] == pytest.approx(last.exploitability, abs=1e-6)


def test_a_game_over_the_size_is_left_out_by_default_and_refused_when_asked_for(tmp_path, monkeypatch, capsys):
    import shell.games.exploitability as module

    monkeypatch.setattr(module, "MAX_INFORMATION_STATES", 5)
    module._game_states.cache_clear()
    try:
        run = train(config=kuhn_config(), run_dir=tmp_path / "auto", progress=False)
        assert "nash_conv" not in run.summary
        assert "more than 5 information states" in capsys.readouterr().err
        with pytest.raises(ConfigError) as err:
            train(config=kuhn_config(**{"run.exploitability": True}), run_dir=tmp_path / "asked", progress=False)
        assert str(err.value).startswith("run.exploitability = true: ") and "\n" not in str(err.value)
        assert not (tmp_path / "asked").exists()
    finally:
        module._game_states.cache_clear()


def test_exploitability_asked_of_another_backend_or_a_recurrent_policy_is_refused_in_one_line():
    with pytest.raises(ConfigError, match="measures an OpenSpiel game"):
        load_config("cartpole", {"run.exploitability": True})
    with pytest.raises(ConfigError, match="recurrent policy"):
        load_config("kuhn", {"run.exploitability": True, "policy.recurrent": "gru"})
