"""The stateful half: config, envs, networks, storage, the PPO update, the runner.

Importing it registers ``CartPoleNoVel-v1`` and ``PendulumNoVel-v1`` with gymnasium (shell/pomdp.py).
"""

from shell.pomdp import register as _register_pomdp

_register_pomdp()
