"""The run configuration: its schema (:mod:`shell.config.schema`, the attrs classes of every TOML section) and
its loading (:mod:`shell.config.loading`: config files, ``--set`` overrides, hints and the dump).

This module only re-exports: ``from shell.config import Config, load_config`` is the public import.
"""

from shell.config.loading import (
    apply_overrides,
    config_extra,
    config_from_dict,
    config_from_saved,
    dump_toml,
    load_config,
    parse_override,
    read_toml,
    resolve_config_path,
    resolve_kwarg_paths,
    section_from_dict,
    shipped_configs,
    split_key,
    toml_value,
)
from shell.config.schema import (
    SECTIONS,
    TUNE_SECTION,
    Config,
    EnvConfig,
    PolicyConfig,
    PPOConfig,
    RunConfig,
    SelfPlayConfig,
)
from shell.installation import CONFIG_DIR

__all__ = [
    "CONFIG_DIR",
    "SECTIONS",
    "TUNE_SECTION",
    "Config",
    "EnvConfig",
    "PPOConfig",
    "PolicyConfig",
    "RunConfig",
    "SelfPlayConfig",
    "apply_overrides",
    "config_extra",
    "config_from_dict",
    "config_from_saved",
    "dump_toml",
    "load_config",
    "parse_override",
    "read_toml",
    "resolve_config_path",
    "resolve_kwarg_paths",
    "section_from_dict",
    "shipped_configs",
    "split_key",
    "toml_value",
]
