"""The PettingZoo backend: N copies of a Parallel-API multi-agent env, or of a turn-based (AEC) game, as rows of
one batch.

``env.backend = "pettingzoo"`` and ``env.id`` names a module with a ``parallel_env(**kwargs)``
function (``"mpe2.simple_spread_v3"``); ``env.kwargs`` are passed to it. From Python, a factory
``Callable[[], pettingzoo.ParallelEnv]`` works too (``shell.train(..., env=factory)`` with this backend).

Rows. The agents are split into groups (``env.groups``; by default agents with identical observation
and action spaces, named by their common prefix, as BenchMARL groups them). A group of M agents in
N copies gives ``N * M`` rows, copy-major: row ``i * M + j`` is agent j of copy i, in the group's fixed
agent order, at every step. Each row is one agent's own PPO sample stream: its reward, its own
termination and truncation flags, and a truncation bootstraps from that agent's final observation.

Agents that come and go. PettingZoo drops an agent from its dicts once it is done; its row is then
not ``valid`` (DESIGN.md, "Rows and the validity mask") until its copy resets, so no transition of a
gone agent reaches GAE, the losses, the normalisers or the episode statistics. A copy resets when
its last agent is done (SAME_STEP: the step that ends the episode returns the reset observations,
and the ended rows' final observations for the bootstrap, whose critic part is of that step: its
``state()`` and its agents' observations, not the reset's).

What each row observes (``policy.agent_id``, ``policy.critic``):

- the agent's own observation, with the agent's one-hot index ``[M]`` appended when
  ``policy.agent_id`` (a key ``"agent_id"`` beside a Dict observation's keys);
- with ``policy.critic = "state"`` or ``"concat"`` the observation becomes a Dict of ``"obs"`` (the
  above, all the actor sees) and ``"critic"`` (all the critic sees): the env's global ``state()``, or
  every agent's observation of the group in the group's order (zeros for a gone agent), then the
  agent's one-hot index, since each agent's value differs (its own rewards). These need flat Box
  observations.

Turn-based games. A module with ``env()`` and no ``parallel_env()`` (PettingZoo's classic games:
``"pettingzoo.classic.tictactoe_v3"``), or a factory that makes an AEC env, is played turn by turn
(DESIGN.md, "Turns"): each copy is a :class:`shell.envs.pettingzoo.turns.TurnGame`, one move per joint step.
Only the seat to move has a valid row (the actions of the others are never sent); a seat's reward is what it
collected since its own last move (PettingZoo's ``last()``), paid at the step after which it is to move again;
the end of a game gives every seat its final transition (terminated, or truncated by ``env.max_episode_steps``
moves), also the seats that did not move last. In storage these rewards and dones sit at the steps where the
seat waited; the lane is a turn-based one (:attr:`shell.envs.base.LaneSpec.turns`), and :func:`core.turn_gae`
gives them to the seat's last move (the loser of connect four learns from the move that lost). Seats with the
same spaces form one group by default: one policy plays every seat (self-play).

Action masks per agent: a Dict observation key ``"action_mask"`` (PettingZoo's classic games) or
``info[agent]["action_mask"]``, by ``env.action_mask`` (``"auto"``, ``"obs"``, ``"info"``, ``"none"``).

Episode statistics are per copy: an episode's return is the sum over the group's agents of each
agent's return (the figure a cooperative task is judged by), its length the copy's steps.

The package, one module per idea; a module imports only those named after it (pyproject.toml's
import-linter contract ``pettingzoo-layers``):

- :mod:`shell.envs.pettingzoo.backend`: the registry's functions (``check_config``, ``eval_config``,
  ``make``, ``from_factory``, re-exported here), and ``make_game`` (one AEC game, for ``ppo-core play``);
- :mod:`shell.envs.pettingzoo.vector`: ``ParallelVecEnv``, the lane env;
- :mod:`shell.envs.pettingzoo.rows`: ``GroupRows``, one group's agents in the N copies as rows;
- :mod:`shell.envs.pettingzoo.copies`: the N copies, stepped in this process or in worker processes;
- :mod:`shell.envs.pettingzoo.groups`: the agents' groups;
- :mod:`shell.envs.pettingzoo.turns`: ``TurnGame``, an AEC game as the copies step it.
"""

from shell.envs.pettingzoo.backend import check_config, eval_config, from_factory, make, make_game

__all__ = ["check_config", "eval_config", "from_factory", "make", "make_game"]
