"""Run configuration: the schema (frozen dataclasses with every default) and its loader
(YAML, key=value overrides). Imports nothing else from nmt."""

from nmt.config.schema import Config, ConfigError, ModelConfig, StudyConfig

__all__ = ["Config", "ConfigError", "ModelConfig", "StudyConfig"]
