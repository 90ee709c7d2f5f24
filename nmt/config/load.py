"""Config loading: YAML files and ``key=value`` overrides, coerced to the schema and validated.

The schema, every key with its type and default, is nmt/config/schema.py. An unknown key, a value
of the wrong type or an impossible value raises :class:`~nmt.config.schema.ConfigError` naming
the dotted key (``model.atention: unknown key``) before any work starts; the checks of
values are in nmt/config/checks.py. The differences between two configs (for ``--resume``,
study reuse and averaging) are in nmt/config/differences.py, the source-length bucket
syntax in nmt/config/buckets.py.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from pathlib import Path
from typing import Any, Literal

import yaml

from nmt.config.checks import check_config
from nmt.config.schema import (
    LOCAL_KINDS,
    STUDY_SET_KEYS,
    Config,
    ConfigError,
    StudyConfig,
    plain,
)
from nmt.config.study_checks import check_study
from nmt.config.yaml_file import read_yaml


def _coerce(value: Any, tp: Any, key: str) -> Any:
    """Check ``value`` against annotation ``tp``; return it converted (lists to tuples)."""
    origin = typing.get_origin(tp)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(tp)
        if value is None and type(None) in args:
            return None
        errors = []
        for arg in args:
            if arg is type(None):
                continue
            try:
                return _coerce(value, arg, key)
            except ConfigError as e:
                errors.append(str(e))
        raise ConfigError(errors[0] if errors else f"{key}: must not be null")
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{key}: {value!r} is not one of {', '.join(map(str, allowed))}")
        return value
    if origin is tuple:
        (item_tp, _ellipsis) = typing.get_args(tp)
        if isinstance(value, str) or not isinstance(value, (list, tuple)):
            raise ConfigError(f"{key}: expected a list, got {value!r}")
        return tuple(_coerce(v, item_tp, f"{key}[{i}]") for i, v in enumerate(value))
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{key}: expected a mapping, got {value!r}")
        return {str(k): str(v) for k, v in value.items()}
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{key}: expected true or false, got {value!r}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{key}: expected an integer, got {value!r}")
        return value
    if tp is float:
        # PyYAML reads YAML 1.1, where 1e-3 (no dot) is a string; YAML 1.2 and every user
        # mean a number
        if isinstance(value, str) and _FLOAT.fullmatch(value.strip()):
            return float(value)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{key}: expected a number, got {value!r}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{key}: expected a string, got {value!r}")
        return value
    raise ConfigError(f"{key}: unsupported type {tp}")  # pragma: no cover


_FLOAT = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?")


def _build(cls: type, raw: Any, prefix: str) -> Any:
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{prefix.rstrip('.') or 'config'}: expected a mapping, got {raw!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    for key in raw:
        if key not in names:
            raise ConfigError(f"{prefix}{key}: unknown key (known: {', '.join(sorted(names))})")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in raw:
            continue
        tp = hints[f.name]
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            kwargs[f.name] = _build(tp, raw[f.name], f"{prefix}{f.name}.")
        else:
            kwargs[f.name] = _coerce(raw[f.name], tp, f"{prefix}{f.name}")
    return cls(**kwargs)


def from_dict(raw: dict[str, Any]) -> Config:
    """Build and validate a :class:`Config` from a nested dict.

    Raises:
        ConfigError: unknown key, wrong type or impossible value (message names the key).
    """
    cfg = _build(Config, raw, "")
    check_config(cfg)
    return cfg


def parse_override(text: str) -> tuple[list[str], Any]:
    """Split ``"model.attention=dot"`` into (["model", "attention"], "dot").

    The value is parsed as YAML, so ``3`` is an int, ``null`` is None, ``[a, b]`` a list.

    Raises:
        ConfigError: no ``=`` or an empty key.
    """
    if "=" not in text:
        raise ConfigError(f"override {text!r}: expected key=value, e.g. model.attention=dot")
    key, value = text.split("=", 1)
    if not key.strip():
        raise ConfigError(f"override {text!r}: empty key")
    try:
        parsed = yaml.safe_load(value) if value.strip() else ""
    except yaml.YAMLError:
        parsed = value
    return key.strip().split("."), parsed


def apply_overrides(raw: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """Return a copy of ``raw`` with dotted ``key=value`` overrides applied."""
    raw = plain(raw)
    for text in overrides:
        path, value = parse_override(text)
        node = raw
        for i, part in enumerate(path[:-1]):
            nxt = node.get(part)
            if nxt is None:
                nxt = node[part] = {}
            if not isinstance(nxt, dict):
                raise ConfigError(f"override {text!r}: {'.'.join(path[: i + 1])} is not a section")
            node = nxt
        node[path[-1]] = value
    return raw


def load_study_config(path: str | Path, overrides: list[str] | None = None) -> StudyConfig:
    """Read a study YAML file (keys of :class:`StudyConfig`) with ``key=value`` overrides.

    Raises:
        ConfigError: unreadable file, unknown key, wrong type, impossible value, no
            ``base_config`` (in the file or an override).
    """
    path = Path(path)
    raw = apply_overrides(read_yaml(path), overrides or [])
    try:
        cfg = _build(StudyConfig, raw, "")
        _refuse_overrides_the_study_sets(cfg.overrides)
        check_study(cfg)
        if "base_config" not in raw:  # a default would train another corpus's recipe unsaid
            raise ConfigError(
                "base_config: missing; name the training config every model of the study "
                "starts from, e.g. base_config: configs/multi30k_deen_additive.yaml"
            )
    except ConfigError as e:
        raise ConfigError(f"{_where(path, overrides, e)}: {e}") from None
    return cfg


def _refuse_overrides_the_study_sets(overrides: tuple[str, ...]) -> None:
    """An override of a key the study sets for each model itself would be replaced
    without a word (``STUDY_SET_KEYS``); it is an error naming the override."""
    for text in overrides:
        path, value = parse_override(text)
        for key, instead in STUDY_SET_KEYS.items():
            parts = key.split(".")
            # model.attention=dot, or the whole section: model={attention: dot, ...}
            node: Any = {path[-1]: value}
            for part in parts[len(path) - 1 :]:
                node = node.get(part) if isinstance(node, dict) else None
            if parts[: len(path)] == path and node is not None:
                raise ConfigError(
                    f"overrides: {text!r} sets {key}, which the study sets for "
                    f"each model itself, so it would be ignored; {instead}"
                )


def load_config(path: str | Path, overrides: list[str] | None = None) -> Config:
    """Read a YAML config, apply ``key=value`` overrides and validate.

    Raises:
        ConfigError: missing or unreadable file, YAML syntax error, or invalid keys/values.
    """
    path = Path(path)
    raw = apply_overrides(read_yaml(path), overrides or [])
    if "base_config" in raw and "model" not in raw:
        raise ConfigError(f"{path}: this is a study config; run it with `nmt study {path}`")
    try:
        return from_dict(raw)
    except ConfigError as e:
        raise ConfigError(f"{_where(path, overrides, e)}: {e}") from None


def ignored_overrides(cfg: Config, overrides: list[str] | None) -> list[str]:
    """Warnings for ``key=value`` overrides that the validated ``cfg`` never reads: keys that
    only one attention type or one training setting uses (``model.heads=4`` with additive
    attention). They stay valid, so that one config serves every attention, but a user who
    types one expects it to act. One line per override, in the order given; [] when all act.
    """
    m, sw = cfg.model, cfg.subwords
    local = (
        m.attention not in LOCAL_KINDS,
        f"model.attention={m.attention} (only local_m and local_p use it)",
    )
    unused = {
        "model.heads": (
            m.attention != "multihead",
            f"model.attention={m.attention} (only multihead uses it)",
        ),
        "model.local_window": local,
        "model.local_score": local,
        "subwords.nbest_size": (
            sw.sampling_alpha is None,
            "subwords.sampling_alpha unset (it is used only when sampling)",
        ),
        "model.word_dropout_target": (m.word_dropout == 0, "model.word_dropout=0"),
    }
    warnings = []
    for o in overrides or []:
        k = o.split("=", 1)[0].strip()
        if k in unused and unused[k][0]:
            warnings.append(f"warning: override {o!r} has no effect with {unused[k][1]}")
    return warnings


def _where(path: Path, overrides: list[str] | None, error: ConfigError) -> str:
    """The file, and the overrides that set the faulty key or a key the error names: for an
    unknown section (``trian.max_epochs=3``) the key in error is the override's first part, and
    a clash of two keys (``model.attention=dot model.enc_hidden=128``) blames both overrides.
    Of one key given twice, the last one counts, as it does in the config."""
    message = str(error)
    key = message.split(":", 1)[0]
    # the list of known keys after an unknown one names bare keys that are not at fault
    told = re.sub(r"\(known: [^)]*\)", "", message.split(":", 1)[-1])
    last: dict[str, str] = {}
    for o in overrides or []:
        k = o.split("=", 1)[0].strip()
        named = "." in k and re.search(rf"(?<![\w.]){re.escape(k)}(?![\w.])", told)
        if k == key or k.startswith(key + ".") or named:
            last.pop(k, None)  # keep the order of the last settings
            last[k] = o
    given = list(last.values())
    if not given:
        return str(path)
    return f"{path} with override{'s' if len(given) > 1 else ''} {', '.join(map(repr, given))}"
