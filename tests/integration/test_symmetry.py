"""Symmetry augmentation (``ppo.symmetry``): the shipped connect-four mirror against a reference loop, the update's
minibatch rows replaced whole with probability 1/2, and every bad input as one line."""

from __future__ import annotations

import csv
from types import SimpleNamespace

import attrs
import numpy as np
import pytest
import torch

from shell.api import train
from shell.config import load_config
from shell.envs.pettingzoo.symmetries import connect_four_mirror, tictactoe_dihedral
from shell.errors import ConfigError, TrainingError
from shell.ppo import PPO

from .conftest import run_main
from .game_bots import _c4_wins, _play, _value, _winner

MIRROR = "shell.envs.pettingzoo.symmetries:connect_four_mirror"
HERE = "tests.integration.test_symmetry"
CONNECT_FOUR = {"env.num_envs": 4, "ppo.num_steps": 16, "ppo.num_minibatches": 2, "ppo.update_epochs": 2,
                "run.total_timesteps": 192, "run.eval_episodes": 0, "run.loggers": [], "selfplay.opening_moves": 0,
                "selfplay.vary_openings": False,
                "selfplay.bots": [], "selfplay.bot_prob": 0.0}  # the bots' generator is one per process


def wrong_shape(obs, raw_actions, action_mask):
    """A symmetry that drops a row of its actions."""
    return obs, raw_actions[1:], action_mask


not_a_function = 3


def random_boards(n: int, seed: int) -> np.ndarray:
    """``[n, 6, 7, 2]`` int8 boards of random play (plane 0 the mover's), none already won."""
    rng = np.random.default_rng(seed)
    boards = np.zeros((n, 6, 7, 2), dtype=np.int8)
    for board in boards:
        for _ in range(int(rng.integers(0, 30))):
            column = int(rng.choice([c for c in range(7) if not board[0, c].any()]))
            if _c4_wins(board, 0, column):
                break
            board[int(np.flatnonzero(~board[:, column].any(axis=1)).max()), column, 0] = 1
            board[:] = board[:, :, ::-1]  # the other seat moves next
    return boards


def test_the_connect_four_mirror_swaps_columns_and_keeps_every_win_and_legal_move():
    """Against a loop over cells: the image's cell (r, c) is the board's (r, 6 - c); a column wins (for either seat)
    and is legal exactly where its mirror column did and was; the action c becomes 6 - c; twice is the identity;
    the flattened and the dict layouts give the same."""
    boards = random_boards(300, seed=3)
    masks = torch.tensor(~boards[:, 0].any(axis=2))  # [B, 7]: a column with room in its top row
    actions = torch.randint(0, 7, (len(boards),), generator=torch.Generator().manual_seed(0))
    obs = {"observation": torch.tensor(boards), "other": torch.arange(len(boards))}
    image, image_actions, image_masks = connect_four_mirror(obs, actions, masks)
    mirrored = image["observation"].numpy()
    assert torch.equal(image["other"], obs["other"])  # other keys untouched
    wins = 0
    for b, board in enumerate(boards):
        for r in range(6):
            for c in range(7):
                assert (mirrored[b, r, c] == board[r, 6 - c]).all()
        for c in range(7):
            assert bool(image_masks[b, c]) == bool(masks[b, 6 - c])
            for plane in (0, 1):
                won = masks[b, c] and _c4_wins(board, plane, c)
                assert won == (image_masks[b, 6 - c] and _c4_wins(mirrored[b], plane, 6 - c))
                wins += bool(won)
        assert int(image_actions[b]) == 6 - int(actions[b])
    assert wins > 50  # the boards hold wins and threats to keep
    flat, flat_actions, flat_masks = connect_four_mirror(obs["observation"].flatten(1), actions, masks)
    assert flat.shape == (len(boards), 84) and torch.equal(flat, image["observation"].flatten(1))
    assert torch.equal(flat_actions, image_actions) and torch.equal(flat_masks, image_masks)
    again = connect_four_mirror(image, image_actions, image_masks)
    assert torch.equal(again[0]["observation"], obs["observation"]) and torch.equal(again[1], actions)
    assert torch.equal(again[2], masks) and connect_four_mirror(obs, actions, None)[2] is None
    with pytest.raises(ValueError, match=r"needs connect four's planes \[B, 6, 7, 2\] or \[B, 84\], got \[300, 42\]"):
        connect_four_mirror(torch.zeros(300, 42), actions, masks)


def tictactoe_boards(n: int, seed: int) -> list[tuple[int, ...]]:
    """Boards of random play (1 the mover's squares, -1 the other seat's), none already won."""
    rng = np.random.default_rng(seed)
    boards = []
    while len(boards) < n:
        board = (0,) * 9
        for _ in range(int(rng.integers(0, 8))):
            board = _play(board, int(rng.choice([a for a in range(9) if board[a] == 0])))
            if _winner(board):
                break
        if not _winner(board):
            boards.append(board)
    return boards


def test_the_tictactoe_symmetries_keep_every_value_and_legal_move_and_come_from_the_generator():
    """Against a loop over squares: each row's image is one of the square's seven symmetries other than the
    identity (a permutation of the squares that keeps the eight lines), the same one for its pieces, its mask and
    its move; every move keeps its exact value (win, draw or loss, by minimax); all seven are drawn, from the
    generator alone; the flattened and the dict layouts give the same."""
    boards = tictactoe_boards(600, seed=4)
    planes = torch.tensor([[[float(v == 1), float(v == -1)] for v in b] for b in boards]).view(-1, 3, 3, 2)
    masks = torch.tensor([[v == 0 for v in b] for b in boards])
    actions = torch.tensor([int(np.flatnonzero(m)[i % int(m.sum())]) for i, m in enumerate(masks.numpy())])
    obs = {"observation": planes, "other": torch.arange(len(boards))}
    image, image_actions, image_masks = tictactoe_dihedral(obs, actions, masks,
                                                           generator=torch.Generator().manual_seed(0))
    assert torch.equal(image["other"], obs["other"])
    lines = {frozenset(line) for line in ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8),
                                          (0, 4, 8), (2, 4, 6))}
    seen = set()
    for b, board in enumerate(boards):
        turned = tuple(int(image["observation"][b, i // 3, i % 3, 0] - image["observation"][b, i // 3, i % 3, 1])
                       for i in range(9))
        # the symmetries the row's image can be (a board with symmetries of its own fits several)
        candidates = [p for p in _SYMMETRIES if all(turned[p[s]] == board[s] for s in range(9))
                      and all(bool(image_masks[b, p[s]]) == bool(masks[b, s]) for s in range(9))
                      and p[int(actions[b])] == int(image_actions[b])]
        assert candidates, (board, turned)
        assert any(p != tuple(range(9)) for p in candidates) or board == (0,) * 9
        if len(candidates) == 1:
            seen.add(candidates[0])
        assert _value(_play(turned, int(image_actions[b]))) == _value(_play(board, int(actions[b])))
    assert len(seen) == 7 and all({frozenset(p[s] for s in line) for line in lines} == lines for p in seen)
    again = tictactoe_dihedral(obs, actions, masks, generator=torch.Generator().manual_seed(0))
    assert torch.equal(again[1], image_actions) and torch.equal(again[0]["observation"], image["observation"])
    flat = tictactoe_dihedral(planes.flatten(1), actions, masks, generator=torch.Generator().manual_seed(0))
    assert flat[0].shape == (len(boards), 18) and torch.equal(flat[0], image["observation"].flatten(1))
    assert torch.equal(flat[1], image_actions) and torch.equal(flat[2], image_masks)
    assert tictactoe_dihedral(planes, actions, None, generator=torch.Generator())[2] is None
    with pytest.raises(ValueError, match=r"needs tic-tac-toe's planes \[B, 3, 3, 2\] or \[B, 18\], got \[600, 9\]"):
        tictactoe_dihedral(torch.zeros(600, 9), actions, masks, generator=torch.Generator())


#: the square's eight symmetries as where each square goes, written out apart from the product's table
_SYMMETRIES = [tuple(3 * a + b for i in range(3) for j in range(3) for a, b in [move(i, j)]) for move in (
    lambda i, j: (i, j), lambda i, j: (j, 2 - i), lambda i, j: (2 - i, 2 - j), lambda i, j: (2 - j, i),
    lambda i, j: (i, 2 - j), lambda i, j: (2 - i, j), lambda i, j: (j, i), lambda i, j: (2 - j, 2 - i))]


def test_a_symmetry_with_a_generator_keyword_draws_from_the_runs_generator():
    """PPO hands its generator to a function that takes one; the rows then repeat with the seed."""
    n = 500
    planes = torch.zeros(n, 3, 3, 2)
    planes[:, 0, 0, 0] = 1.0
    mb = {"obs": planes, "raw_actions": torch.full((n,), 8), "action_masks": torch.ones(n, 9, dtype=torch.bool)}
    outs = [PPO._mirrored(mirroring(tictactoe_dihedral, seed=seed), mb)["raw_actions"] for seed in (0, 0, 1)]
    assert torch.equal(outs[0], outs[1]) and not torch.equal(outs[0], outs[2])
    assert set(outs[0].tolist()) == {0, 2, 6, 8}  # the corner 8 stays a corner, and half the rows keep it


def mirroring(symmetry, name: str = f"{HERE}:symmetry", seed: int = 0) -> SimpleNamespace:
    """What :meth:`PPO._mirrored` reads of its PPO."""
    return SimpleNamespace(symmetry=symmetry, cfg=SimpleNamespace(symmetry=name),
                           generator=torch.Generator().manual_seed(seed))


def shifted(obs, raw_actions, action_mask):
    """A toy symmetry whose image differs from its original in every field of every row."""
    return {"observation": obs["observation"] + 1000.0}, raw_actions + 100, ~action_mask


def test_each_minibatch_row_is_replaced_whole_by_its_image_with_probability_one_half():
    n = 4000
    mb = {"obs": {"observation": torch.randn(n, 3)}, "raw_actions": torch.randint(0, 7, (n,)),
          "action_masks": torch.rand(n, 7) < 0.5,
          **{key: torch.randn(n) for key in ("log_probs", "values", "advantages", "returns")}}
    out = PPO._mirrored(mirroring(shifted), mb)
    flipped = (out["obs"]["observation"] != mb["obs"]["observation"]).all(1)
    for key in ("log_probs", "values", "advantages", "returns"):
        assert out[key] is mb[key]  # the old log-prob, value, advantage and return are the original row's
    image = shifted(mb["obs"], mb["raw_actions"], mb["action_masks"])
    for i in range(n):  # a row is the original or the image in every field, never a mix
        source = (image[0]["observation"], image[1], image[2]) if flipped[i] else \
            (mb["obs"]["observation"], mb["raw_actions"], mb["action_masks"])
        assert torch.equal(out["obs"]["observation"][i], source[0][i])
        assert out["raw_actions"][i] == source[1][i] and torch.equal(out["action_masks"][i], source[2][i])
    assert 0.46 < flipped.float().mean() < 0.54
    again = PPO._mirrored(mirroring(shifted), mb)  # the same generator state: the same rows
    assert torch.equal(again["raw_actions"], out["raw_actions"])
    other = PPO._mirrored(mirroring(shifted, seed=1), mb)
    assert not torch.equal(other["raw_actions"], out["raw_actions"])
    bare = PPO._mirrored(mirroring(lambda o, a, m: (o + 1000.0, a + 100, m)),  # a bare observation, no mask
                         {"obs": mb["obs"]["observation"], "raw_actions": mb["raw_actions"]})
    assert torch.equal(bare["obs"] != mb["obs"]["observation"], (bare["raw_actions"] != mb["raw_actions"])[:, None]
                       .expand(n, 3)) and "action_masks" not in bare
    with pytest.raises(TrainingError, match="returned action_mask as Tensor, not None as given"):
        PPO._mirrored(mirroring(lambda o, a, m: (o, a, torch.ones(n, 7, dtype=torch.bool)), f"{HERE}:bad"),
                      {"obs": mb["obs"]["observation"], "raw_actions": mb["raw_actions"]})


@pytest.mark.parametrize(("symmetry", "message"), [
    (wrong_shape, r"returned raw_actions as \(3,\) torch.int64, not \(4,\) torch.int64 as given"),
    (lambda obs, a, m: [obs, a, m], "returned list, not the tuple"),
    (lambda obs, a, m: ({"x": obs["observation"]}, a, m), r"returned obs\['observation'\] as NoneType"),
    (lambda obs, a, m: (obs, a, None), "returned action_mask as NoneType"),
    (lambda obs, a, m: connect_four_mirror(obs["observation"][:, :3], a, m),
     r"raised ValueError: connect_four_mirror needs connect four's planes \[B, 6, 7, 2\] or \[B, 84\]"),
])
def test_a_symmetry_that_returns_something_else_is_a_training_error_naming_it(symmetry, message):
    boards = torch.zeros(4, 6, 7, 2, dtype=torch.int8)
    mb = {"obs": {"observation": boards}, "raw_actions": torch.zeros(4, dtype=torch.long),
          "action_masks": torch.ones(4, 7, dtype=torch.bool)}
    with pytest.raises(TrainingError, match=f"ppo.symmetry '{HERE}:bad' {message}"):
        PPO._mirrored(mirroring(symmetry, f"{HERE}:bad"), mb)


def test_connect_four_trains_with_the_mirror_and_repeats_itself(tmp_path):
    runs = []
    for name in ("a", "b", "off"):
        cfg = load_config("connect-four", CONNECT_FOUR)  # the shipped config sets the mirror
        assert cfg.ppo.symmetry == MIRROR
        if name == "off":
            cfg = attrs.evolve(cfg, ppo=attrs.evolve(cfg.ppo, symmetry=None))
        train(config=cfg, run_dir=tmp_path / name, progress=False)
        with open(tmp_path / name / "metrics.csv") as f:
            runs.append([{k: v for k, v in row.items() if k not in ("seconds", "sps")} for row in csv.DictReader(f)])
    assert len(runs[0]) == 3 and runs[0] == runs[1]  # the flips come from the run's generator
    assert runs[0][0]["policy_loss"] != runs[2][0]["policy_loss"]  # and change the update


@pytest.mark.parametrize(("overrides", "message"), [
    ({"ppo.symmetry": "mirror"}, "ppo.symmetry = 'mirror': needs a function \"module.path:function\""),
    ({"ppo.symmetry": "no_such_module_xyz:mirror"}, "ppo.symmetry: cannot import 'no_such_module_xyz'"),
    ({"ppo.symmetry": f"{HERE}:missing"}, f"ppo.symmetry: module '{HERE}' has no 'missing'"),
    ({"ppo.symmetry": f"{HERE}:not_a_function"}, "is an object of type int, not a function of"),
    ({"ppo.symmetry": MIRROR, "env.normalize_obs": True}, "the mirror of a normalised observation is not"),
    ({"ppo.symmetry": MIRROR, "policy.recurrent": "gru"}, "mirrors single steps; a recurrent policy"),
])
def test_bad_symmetry_settings_are_one_line(tmp_path, overrides, message):
    with pytest.raises(ConfigError, match=message) as info:
        train(config=load_config("connect-four", {**CONNECT_FOUR, **overrides}), run_dir=tmp_path / "run",
              progress=False)
    assert "\n" not in str(info.value)


def test_from_the_command_line_a_bad_setting_exits_2_and_a_bad_function_1(tmp_path):
    sets = [a for k, v in CONNECT_FOUR.items() if k != "run.loggers"
            for a in ("--set", f"{k}={str(v).lower() if isinstance(v, bool) else v}")]
    out = run_main("--config", "connect-four", "--run-dir", str(tmp_path / "a"), *sets,
                   "--set", f'ppo.symmetry="{HERE}:missing"')
    assert out.returncode == 2, out.stderr
    assert out.stderr.strip().splitlines()[-1] == f"error: ppo.symmetry: module '{HERE}' has no 'missing'"
    out = run_main("--config", "connect-four", "--run-dir", str(tmp_path / "b"), *sets,
                   "--set", f'ppo.symmetry="{HERE}:wrong_shape"')
    assert out.returncode == 1, out.stderr
    assert f"ppo.symmetry '{HERE}:wrong_shape' returned raw_actions as" in out.stderr.strip().splitlines()[-1]
