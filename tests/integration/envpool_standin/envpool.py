"""A stand-in for the ``envpool`` package (about 750 MB with its assets, too heavy for CI) with the
semantics the ``envpool`` backend relies on: ``make_gymnasium`` returns a gymnasium ``VectorEnv``
that autoresets NEXT_STEP (the step after an end returns the first observation of the next
episode with reward 0 and both flags False, ignoring the action), ``reset(seed=s)`` seeds sub-env
i with ``s + i``, ``max_episode_steps`` sets the time limit, and ``list_all_envs`` names the ids.
Real EnvPool runs are recorded in bench/BENCHMARKS.md. Put this folder on ``sys.path`` to use it.
"""

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
    env.reset(seed=seed)
    return env
