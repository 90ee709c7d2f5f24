"""Reading a YAML config file into its top-level mapping, refusing what plain YAML would
silently accept (a key given twice) and naming the file, line and column of every problem."""

from __future__ import annotations

from collections.abc import Hashable
from pathlib import Path
from typing import Any

import yaml

from nmt.config.schema import ConfigError


class _UniqueKeyLoader(yaml.SafeLoader):
    """SafeLoader that refuses a key given twice in one mapping: plain YAML keeps the last
    silently, so a second ``train:`` block would drop every setting of the first."""

    def construct_mapping(self, node, deep=False):
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == "tag:yaml.org,2002:merge":
                continue  # `<<: *anchor` may be overridden by the mapping's own keys, by design
            key = self.construct_object(key_node, deep=deep)
            if not isinstance(key, Hashable):
                continue  # SafeLoader's own construct_mapping names it ("unhashable key")
            line = key_node.start_mark.line + 1
            if key in seen:
                raise yaml.constructor.ConstructorError(
                    None,
                    None,
                    f"the key {key!r} is given twice (first at line {seen[key]}); "
                    "YAML would keep only the last",
                    key_node.start_mark,
                )
            seen[key] = line
        return super().construct_mapping(node, deep=deep)


def read_yaml(path: Path) -> dict[str, Any]:
    """The top-level mapping of a YAML config file.

    Raises:
        ConfigError: unreadable, not UTF-8, invalid YAML, a key given twice in one mapping
            (``file:line:column``), empty, or not a mapping.
    """
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read config ({e.strerror or e})") from e
    except UnicodeDecodeError as e:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
            f"{e.start}); save the config as UTF-8"
        ) from None
    try:
        raw = yaml.load(text, Loader=_UniqueKeyLoader)  # a SafeLoader: no arbitrary objects
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = getattr(e, "problem", None) or str(e).splitlines()[0]
        raise ConfigError(f"{where}: invalid YAML: {problem}") from None
    if raw is None:
        # an empty file is a mistake (a wrong path, an unsaved editor), not "all defaults":
        # it would start a long run nobody asked for
        raise ConfigError(
            f"{path}: the config is empty; start from a file in configs/ "
            "(e.g. configs/quickstart_deen.yaml)"
        )
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return raw
