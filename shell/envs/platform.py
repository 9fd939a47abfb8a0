"""The Platform domain (parameterised actions), registered with gymnasium as ``Platform-v0`` on ``import shell``.

Reference: Masson, Ranchod and Konidaris, "Reinforcement Learning with Parameterized Actions", AAAI 2016
(arXiv:1509.01644), in the version of cycraig/gym-platform (commit e932987, file
``gym_platform/envs/platform_env.py``, cited below as ``platform_env.py:LINE``; the id and its time limit in
``gym_platform/__init__.py``), a port of WarwickMasson/aaai-platformer. MP-DQN's published returns (Bester,
James and Konidaris 2019, arXiv:1905.04388) were measured on that version. This module is written anew from
it; the dynamics are the same, draw for draw (see "Departures" for what differs).

The task: a player starts at the left end of three platforms with two gaps between them; an enemy walks
to and fro on each of the first two platforms. The player must get past the enemies and over the gaps to
the right edge of the third platform. Touching an enemy or falling into a gap ends the episode.

Constants (units: the reference's length units, seconds, length units per second). Source: the
``Constants`` class of ``platform_env.py`` unless said otherwise.

===========================  ======================  ===============================================
name                         value                   source
===========================  ======================  ===============================================
PLATFORM_HEIGHT              40.0                    platform_env.py:26 (PLATFORM_HEIGHT)
PLATFORM_WIDTHS              (250, 275, 50)          platform_env.py:27-29 (WIDTH1..3)
GAPS                         (225, 235)              platform_env.py:30-31 (GAP1, GAP2)
platforms' base heights      0.0 for all three       platform_env.py:32-34 (HEIGHT1..3)
MAX_HEIGHT                   1.0                     platform_env.py:35 (max(1, heights))
TOTAL_WIDTH = GOAL_X         1035.0                  platform_env.py:37 (widths + gaps); the right
                                                     edge of platform 3 (platform_env.py:292-294)
ENEMY_SPEED                  30.0                    platform_env.py:42
ENEMY_NOISE = PLAYER_NOISE   0.5 (std per second)    platform_env.py:43, 47
BODY_WIDTH, BODY_HEIGHT      20.0, 30.0              platform_env.py:44, 48, 459, 489
DT (one frame)               0.05 s                  platform_env.py:51
MAX_DX, MAX_DY               100.0, 200.0            platform_env.py:52-53 (speed bounds)
MAX_DX_ON                    70.0                    platform_env.py:54 (speed bound on a platform)
MAX_DDX = (100 - 70) / DT    600.0                   platform_env.py:55
MAX_DDY = MAX_DY / DT        4000.0                  platform_env.py:56
LEAP_DEV, HOP_DEV            1.0, 1.0                platform_env.py:57-58 (take-off noise std)
HOP_DY, LEAP_DY              35.0, 25.0              platform_env.py:546, 550 (take-off dy)
VELOCITY_DECAY               0.99 per frame          platform_env.py:59
GRAVITY                      9.8                     platform_env.py:60 (dv_y = -9.8 * DT per frame)
RUN_FRAMES                   20 (1 s)                platform_env.py:235, 244-245 (difft 1.0 - DT...)
PARAMETER_HIGH               run 30, hop 720,        platform_env.py:71-76 (PARAMETERS_MIN = 0)
                             leap 430
MAX_EPISODE_STEPS            200                     gym_platform/__init__.py:6 (a TimeLimit)
===========================  ======================  ===============================================

Spaces:

- action: ``Dict({"kind": Discrete(3), "run": Box(0, 30, (1,), float32), "hop": Box(0, 720, (1,), float32),
  "leap": Box(0, 430, (1,), float32)})``. ``kind`` 0 = run, 1 = hop, 2 = leap; only the chosen kind's
  parameter is read (clipped to its bounds, as the reference does, platform_env.py:232); the other two are
  ignored. The reference's action space is ``Tuple((Discrete(3), Tuple((Box(1), Box(1), Box(1)))))``.
  ``run(p)`` adds ``p`` to the horizontal speed each frame for 1 s (bounded); ``hop(d)``/``leap(d)`` jump aiming at a
  horizontal distance ``d`` (take-off speed ``d / (2 dy / GRAVITY + 1)``, bounded) and last until the
  player lands or the episode ends.
- observation: ``Box(0, 1, (9,), float32)``, the reference's nine state features shifted and scaled as it
  does (platform_env.py:63-66, 384-402): ``(player x + 20) / 1055``, ``player dx / 100``,
  ``enemy x / 1035``, ``(enemy dx + 30) / 60`` (the enemy on the player's platform: the second one once
  player x > 475), then the features of the platform the player is over: its width / 275, the next
  one's width / 275, the gap after it / 235, its left edge / 1035, the next one's height difference / 1
  (always 0 here). Left out: the reference observes ``(features, frames)``, where ``frames`` (declared
  ``Discrete(200)``, commented "steps") is not the episode's step counter but the number of simulation
  frames the last action took (20 for a run, at most 144 for a jump). MP-DQN's agents throw it away;
  it is given here as ``info["frames"]`` (0 after ``reset``), so the observation is one flat vector that
  a plain encoder takes.
- reward: the horizontal distance the player moved during the action, in units of the goal distance:
  ``(x_after - x_before) / 1035`` (platform_env.py:304, 335). It telescopes, so an episode that reaches the
  goal returns exactly 1.0 up to float rounding; one that ends at x returns ``x / 1035``. Not discounted by
  frames (it is the one reward of a semi-MDP step).
- terminated: the player is below the platforms' tops (fell into a gap), touches an enemy, or reaches
  x >= 1035 (platform_env.py:296-306). truncated: never by the env itself; ``Platform-v0`` has gymnasium's
  ``TimeLimit`` of 200 actions, as the reference's registration.

Randomness (all from ``self.np_random``; ``reset(seed=...)`` seeds it): the initial state is fixed (player
at x = 0 on platform 1 at rest, enemies at the right ends of their platforms walking left at 30); the
noise is in the dynamics, drawn in the reference's order within each frame: at take-off two
``-|N(0, dev)|`` offsets (x then y speed), then on every player acceleration (run, take-off, gravity)
``-|N(0, 0.5 DT)|`` on the x speed, then ``N(0, 0.5 DT)`` on the moving enemy's speed.

Departures from the reference: ``render_mode`` must be None (no pygame); the observation is float32 and
flat (the frame count moved to ``info``); the action is a Dict keyed by the action kinds, not a Tuple; an
unknown ``kind`` raises ValueError (the reference raises KeyError); the reward at the goal is computed as
every other step's, ``(x_after - x_before) / 1035``, which is the value the reference's goal branch gives,
since x cannot exceed 1035.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
from gymnasium import spaces

ENV_ID = "Platform-v0"
MAX_EPISODE_STEPS = 200

PLATFORM_HEIGHT = 40.0
PLATFORM_WIDTHS = (250.0, 275.0, 50.0)
GAPS = (225.0, 235.0)
MAX_HEIGHT = 1.0
TOTAL_WIDTH = sum(PLATFORM_WIDTHS) + sum(GAPS)
GOAL_X = TOTAL_WIDTH
PLATFORM_LEFTS = (0.0, PLATFORM_WIDTHS[0] + GAPS[0], PLATFORM_WIDTHS[0] + GAPS[0] + PLATFORM_WIDTHS[1] + GAPS[1])
PLATFORM_TOP = 0.0 + PLATFORM_HEIGHT  # every platform stands at height 0

ENEMY_SPEED = 30.0
ENEMY_NOISE = 0.5
PLAYER_NOISE = ENEMY_NOISE
BODY_WIDTH, BODY_HEIGHT = 20.0, 30.0

DT = 0.05
MAX_DX = 100.0
MAX_DY = 200.0
MAX_DX_ON = 70.0
MAX_DDX = (MAX_DX - MAX_DX_ON) / DT
MAX_DDY = MAX_DY / DT
HOP_DY, HOP_DEV = 35.0, 1.0
LEAP_DY, LEAP_DEV = 25.0, 1.0
VELOCITY_DECAY = 0.99
GRAVITY = 9.8
RUN_FRAMES = 20  # the reference counts 1.0 down by DT while > 0: 20 frames in float64

KINDS = ("run", "hop", "leap")
PARAMETER_HIGH = {"run": 30.0, "hop": 720.0, "leap": 430.0}

SHIFT = np.array([BODY_WIDTH, 0.0, 0.0, ENEMY_SPEED, 0.0, 0.0, 0.0, 0.0, 0.0])
SCALE = np.array([TOTAL_WIDTH + BODY_WIDTH, MAX_DX, TOTAL_WIDTH, 2 * ENEMY_SPEED,
                  max(PLATFORM_WIDTHS), max(PLATFORM_WIDTHS), max(GAPS), TOTAL_WIDTH, MAX_HEIGHT])


def _clip(value: float, low: float, high: float) -> float:
    return min(max(value, low), high)


def _overlapping(x: float, y: float, left: float, bottom: float, width: float, height: float) -> bool:
    """Whether a player's body with its lower-left corner at (x, y) overlaps a box (strict on every side)."""
    return left - BODY_WIDTH < x < left + width and bottom - BODY_HEIGHT < y < bottom + height


class PlatformEnv(gym.Env[np.ndarray, dict[str, Any]]):
    """Platform (Masson et al. 2016) as in cycraig/gym-platform: one step is one parameterised action.

    - action: ``Dict(kind=Discrete(3), run=Box(0, 30, (1,)), hop=Box(0, 720, (1,)), leap=Box(0, 430, (1,)))``,
      float32 Boxes; ``kind`` 0 = run, 1 = hop, 2 = leap, and only the chosen kind's parameter is read.
    - observation: ``[9]`` float32 in [0, 1], the reference's scaled state features.
    - reward: the distance moved right during the action / 1035 (the goal's x): an episode that reaches the
      goal returns 1.0. Terminated on the goal, a fall or an enemy; ``Platform-v0`` truncates after 200 actions.
    - ``info["frames"]``: the simulation frames the action took.

    The module docstring gives the constants, their lines in the reference, the noise and the departures.
    """

    metadata: ClassVar[dict[str, Any]] = {"render_modes": []}

    def __init__(self, render_mode: str | None = None) -> None:
        if render_mode is not None:
            raise ValueError(f"PlatformEnv has no rendering: render_mode must be None, not {render_mode!r}")
        self.render_mode = None
        self.action_space = spaces.Dict({"kind": spaces.Discrete(len(KINDS))} | {
            kind: spaces.Box(0.0, PARAMETER_HIGH[kind], (1,), np.float32) for kind in KINDS})
        self.observation_space = spaces.Box(0.0, 1.0, (len(SCALE),), np.float32)
        self._reset_state()

    # --- gymnasium API -------------------------------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[np.ndarray, dict[str, Any]]:
        super().reset(seed=seed)
        self._reset_state()
        return self._observation(), {"frames": 0}

    def step(self, action: dict[str, Any]) -> tuple[np.ndarray, float, bool, bool, dict[str, Any]]:
        kind_index = int(action["kind"])
        if not 0 <= kind_index < len(KINDS):
            raise ValueError(f"Platform: action kind must be 0 (run), 1 (hop) or 2 (leap), not {kind_index}")
        kind = KINDS[kind_index]
        parameter = _clip(float(np.asarray(action[kind], dtype=np.float64).reshape(-1)[0]),
                          0.0, PARAMETER_HIGH[kind])
        x_before = self.x
        frames = 0
        while True:
            terminated = self._frame(kind, parameter)
            frames += 1
            if terminated or (frames == RUN_FRAMES if kind == "run" else self._on_platform()):
                break
        reward = (self.x - x_before) / GOAL_X
        return self._observation(), reward, terminated, False, {"frames": frames}

    # --- the simulation ---------------------------------------------------------------------------

    def _reset_state(self) -> None:
        """The fixed start: the player at rest at x = 0 on platform 1, each enemy at its platform's right end."""
        self.x, self.y, self.dx, self.dy = 0.0, PLATFORM_TOP, 0.0, 0.0
        self.enemy_x = [PLATFORM_LEFTS[i] + PLATFORM_WIDTHS[i] - BODY_WIDTH for i in (0, 1)]
        self.enemy_dx = [-ENEMY_SPEED, -ENEMY_SPEED]

    def _frame(self, kind: str, parameter: float) -> bool:
        """Advance DT seconds; returns whether the episode ended (fell, touched an enemy, reached the goal)."""
        # the player's control: the action on a platform, gravity in the air
        if self._on_platform():
            if kind == "run":
                self._accelerate(parameter / DT, 0.0)
            else:
                self._take_off(parameter, *((HOP_DY, HOP_DEV) if kind == "hop" else (LEAP_DY, LEAP_DEV)))
        else:
            self._accelerate(0.0, -GRAVITY)
        if self._on_platform():
            self.dx = _clip(self.dx, 0.0, MAX_DX_ON)
        # move the player, then the enemy of the platform the player is past
        enemy = 1 if self.x > PLATFORM_LEFTS[1] else 0
        self.x = _clip(self.x + self.dx * DT, 0.0, TOTAL_WIDTH)
        self.y = self.y + self.dy * DT
        self.dx *= VELOCITY_DECAY
        self._move_enemy(enemy)
        # land on (or bump into) a platform
        for left, width in zip(PLATFORM_LEFTS, PLATFORM_WIDTHS, strict=True):
            if _overlapping(self.x, self.y, left, 0.0, width, PLATFORM_HEIGHT):
                self._push_out(left, width)
                self.dx = 0.0
        fell = self.y < PLATFORM_TOP
        caught = any(_overlapping(self.x, self.y, ex, PLATFORM_TOP, BODY_WIDTH, BODY_HEIGHT) for ex in self.enemy_x)
        return fell or caught or self.x >= GOAL_X

    def _on_platform(self) -> bool:
        """Standing exactly on a platform's top, with the body's x range touching it."""
        return self.y == PLATFORM_TOP and any(
            -BODY_WIDTH <= self.x - left <= width for left, width in zip(PLATFORM_LEFTS, PLATFORM_WIDTHS, strict=True))

    def _accelerate(self, ddx: float, ddy: float) -> None:
        """One frame of acceleration (bounded), the x-speed noise, then the speed bounds (x speed never < 0)."""
        self.dx += _clip(ddx, -MAX_DDX, MAX_DDX) * DT
        self.dy += _clip(ddy, -MAX_DDY, MAX_DDY) * DT
        self.dx -= abs(self.np_random.normal(0.0, PLAYER_NOISE * DT))
        self.dx = max(_clip(self.dx, -MAX_DX, MAX_DX), 0.0)
        self.dy = _clip(self.dy, -MAX_DY, MAX_DY)

    def _take_off(self, distance: float, dy: float, dev: float) -> None:
        """A jump aimed `distance` ahead: the x speed change that covers it in 2 dy / GRAVITY + 1 (bounded)."""
        duration = 2.0 * dy / GRAVITY + 1.0
        ddx = _clip(distance / duration - self.dx, -MAX_DDX, MAX_DY - dy)
        noise_x, noise_y = -np.abs(self.np_random.normal(0.0, dev, 2))
        self._accelerate((ddx + noise_x) / DT, (dy + noise_y) / DT)

    def _move_enemy(self, i: int) -> None:
        """The enemy turns at its platform's ends, its speed takes N(0, 0.5 DT) noise, bounded to +-30."""
        left = PLATFORM_LEFTS[i]
        right = left + PLATFORM_WIDTHS[i] - BODY_WIDTH
        if not left < self.enemy_x[i] < right:
            self.enemy_dx[i] = -self.enemy_dx[i]
        self.enemy_dx[i] = _clip(self.enemy_dx[i] + self.np_random.normal(0.0, ENEMY_NOISE * DT),
                                 -ENEMY_SPEED, ENEMY_SPEED)
        self.enemy_x[i] = _clip(self.enemy_x[i] + self.enemy_dx[i] * DT, left, right)

    def _push_out(self, left: float, width: float) -> None:
        """Move the overlapping player out of a platform along the axis needing the shorter move."""
        new_x = left - BODY_WIDTH if self.x < left else left + width if self.x > left + width - BODY_WIDTH else self.x
        new_y = -BODY_HEIGHT if self.y < 0.0 else PLATFORM_TOP if self.y > PLATFORM_TOP - BODY_HEIGHT else self.y
        if new_x != self.x and (new_y == self.y or abs(self.x - new_x) < abs(self.y - new_y)):
            self.x, self.dx = new_x, 0.0  # sideways (against a platform's wall)
        else:
            self.y, self.dy = new_y, 0.0  # up onto the top (or down below it)

    def _observation(self) -> np.ndarray:
        """The nine features (module docstring), shifted and scaled to [0, 1], as float32."""
        enemy = 1 if self.x > PLATFORM_LEFTS[1] else 0
        section = 0 if self.x < PLATFORM_LEFTS[1] else 1 if self.x < PLATFORM_LEFTS[2] else 2
        if section < 2:
            platform = [PLATFORM_WIDTHS[section], PLATFORM_WIDTHS[section + 1], GAPS[section],
                        PLATFORM_LEFTS[section], 0.0]  # height difference: all platforms at height 0
        else:
            platform = [PLATFORM_WIDTHS[2], 0.0, 0.0, PLATFORM_LEFTS[2], 0.0]
        features = np.array([self.x, self.dx, self.enemy_x[enemy], self.enemy_dx[enemy], *platform])
        return ((features + SHIFT) / SCALE).astype(np.float32)


def register() -> None:
    """Register ``Platform-v0`` with gymnasium (idempotent), with the reference's 200-action TimeLimit."""
    if ENV_ID not in gym.registry:
        gym.register(id=ENV_ID, entry_point=PlatformEnv, max_episode_steps=MAX_EPISODE_STEPS)
