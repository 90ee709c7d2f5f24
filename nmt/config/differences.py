"""The differences between two configurations, and the one way they are shown in messages.

``--resume``, the study's reuse check and ``nmt average`` all refuse a configuration that
differs from another one; each names every differing dotted key with both values, in the
same form (``model.enc_hidden: 32 (stored) vs 48 (given)``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from nmt.config.schema import RESUME_ADJUSTABLE, Config

Difference = tuple[str, Any, Any]  # (dotted key, value in a, value in b)


def config_differences(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[Difference]:
    """Every dotted key whose value differs between two nested config dicts, in key order,
    as ``(key, value in a, value in b)``."""
    out = []
    for k in sorted(set(a) | set(b)):
        va, vb = a.get(k), b.get(k)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_differences(va, vb, f"{prefix}{k}.")
        elif va != vb:
            out.append((f"{prefix}{k}", va, vb))
    return out


def describe_differences(diffs: list[Difference], a: str, b: str) -> str:
    """``diffs`` for a one-line message: ``key: va (a) vs vb (b); ...``, with ``a`` and
    ``b`` saying where each value comes from (e.g. "stored" and "given")."""
    return "; ".join(f"{k}: {va!r} ({a}) vs {vb!r} ({b})" for k, va, vb in diffs)


@dataclass(frozen=True)
class ResumeChanges:
    """How a given configuration differs from a run's stored one.

    Attributes:
        changed: every differing key. conflicts: those of them that ``--resume`` may not
            change (all but ``RESUME_ADJUSTABLE``, which extend or budget the run).
    """

    changed: list[Difference]
    conflicts: list[Difference]


def resume_conflicts(stored: Config, given: Config) -> ResumeChanges:
    """What continuing the run trained with ``stored`` under ``given`` would change, and
    what of it ``--resume`` refuses (``nmt train --resume``, the study's reuse check).
    Raises nothing: each caller raises its own error, naming the conflicts with
    :func:`describe_differences`."""
    changed = config_differences(stored.to_dict(), given.to_dict())
    return ResumeChanges(changed, [d for d in changed if d[0] not in RESUME_ADJUSTABLE])
