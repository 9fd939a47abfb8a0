"""A stand-in for the ``envpool`` package (about 750 MB with its assets, too heavy for CI) with the
semantics the ``envpool`` backend relies on: ``make_gymnasium`` returns a gymnasium ``VectorEnv``
that autoresets NEXT_STEP (the step after an end returns the first observation of the next
episode with reward 0 and both flags False, ignoring the action), is seeded when built
(``make_gymnasium(seed=s)`` seeds sub-env i with ``s + i``; ``reset(seed=...)`` is ignored with
EnvPool's warning), ``max_episode_steps`` sets the time limit, and ``list_all_envs`` names the ids.
Real EnvPool runs are recorded in bench/BENCHMARKS.md. Put this folder on ``sys.path`` to use it.
"""

import warnings

import gymnasium as gym
from gymnasium.vector import AutoresetMode


def list_all_envs() -> list[str]:
    import tests.integration.custom_envs  # noqa: F401 - registers Counting-v0 and friends

    return [name for name in gym.registry if not name.startswith("ALE/")]


def make_gymnasium(task_id: str, num_envs: int = 1, seed: int = 42, max_episode_steps: int | None = None,
                   num_threads: int = 0, batch_size: int = 0, thread_affinity_offset: int = -1,
                   **kwargs) -> gym.vector.VectorEnv:
    if max_episode_steps is not None:
        kwargs["max_episode_steps"] = max_episode_steps
    env = gym.make_vec(task_id, num_envs, vectorization_mode="sync",
                       vector_kwargs={"autoreset_mode": AutoresetMode.NEXT_STEP}, **kwargs)
    return SeededWhenBuilt(env, seed)


class SeededWhenBuilt(gym.vector.VectorWrapper):
    """EnvPool's seeding: the seed given when the pool is built; ``reset(seed=...)`` warns and ignores it."""

    def __init__(self, env: gym.vector.VectorEnv, seed: int):
        super().__init__(env)
        self._seed: int | None = seed

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            warnings.warn("EnvPool seeds are fixed when the environment is created. reset(seed=...) is ignored; "
                          "pass seed to envpool.make instead.", UserWarning, stacklevel=2)
        seed, self._seed = self._seed, None  # the first reset starts the seeded streams; later ones continue them
        return self.env.reset(seed=seed, options=options)
