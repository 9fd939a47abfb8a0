"""The stateful half: config, envs, networks, storage, the PPO update, the runner."""
