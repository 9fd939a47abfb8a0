"""Turn-based games' one home (docs/concepts/design.md, "Games have one home"): the opponents (one interface:
random, bots, snapshots), self-play's pool (it picks who plays each copy; the opponents act in :class:`PoolEnv`,
never learning), the seats of an evaluation, the ratings, and ``ppo-core play``.

The shipped bots are functions in the env layer (``shell.envs.pettingzoo.bots``); the config's validators of
``[selfplay]`` and ``run.eval_opponents`` are in the schema.
"""

from shell.games.opponents import (
    Bot,
    BotOpponent,
    Opponent,
    RandomOpponent,
    SnapshotOpponent,
    bot_move,
    import_bots,
    named_opponent,
    play_rows,
    snapshot_name,
)
from shell.games.pool import BOT, LATEST, RANDOM, OpponentPool, PoolEnv, check_selfplay, snapshot_players
from shell.games.ratings import POLICY, MatchTable, Ratings
from shell.games.seating import Seating

__all__ = ["BOT", "LATEST", "POLICY", "RANDOM", "Bot", "BotOpponent", "MatchTable", "Opponent", "OpponentPool",
           "PoolEnv", "RandomOpponent", "Ratings", "Seating", "SnapshotOpponent", "bot_move", "check_selfplay",
           "import_bots", "named_opponent", "play_rows", "snapshot_name", "snapshot_players"]
