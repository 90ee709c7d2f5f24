"""Defined once, derived everywhere: every enumeration of nmt/config/schema.py (attention
kinds, local kinds, precisions, length penalties, ...) is spelt out there only, and the
search defaults (beam size, alpha, length penalty, output length ratio) come from the
config's dataclasses, not from numbers written again in a signature."""

from __future__ import annotations

import ast
import dataclasses
import typing
from pathlib import Path

from nmt.config import schema

REPO = Path(__file__).resolve().parents[1]
SCHEMA = REPO / "nmt" / "config" / "schema.py"
# parameters whose default must be derived from SearchConfig / TrainConfig
SEARCH_PARAMETERS = {"beam", "beam_size", "alpha", "length_penalty", "max_ratio", "precision"}


def _literal_values(hint) -> list[frozenset[str]]:
    """The string sets of every ``Literal`` inside ``hint`` (through ``X | None``)."""
    if typing.get_origin(hint) is typing.Literal:
        return [frozenset(a for a in typing.get_args(hint) if isinstance(a, str))]
    return [v for a in typing.get_args(hint) for v in _literal_values(a)]


def _enumerations() -> set[frozenset[str]]:
    """Each enumeration of two or more names that schema.py declares: its module-level
    ``Literal`` aliases and the ``Literal`` types of its dataclasses' fields."""
    found = [v for obj in vars(schema).values() for v in _literal_values(obj)]
    for obj in vars(schema).values():
        if dataclasses.is_dataclass(obj) and isinstance(obj, type):
            for hint in typing.get_type_hints(obj).values():
                found += _literal_values(hint)
    return {v for v in found if len(v) >= 2}


def _string_collections(source: str):
    """(line, names) of every tuple, list, set or ``Literal[...]`` of two or more string
    constants in ``source``."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.Tuple, ast.List, ast.Set)):  # Literal["a", "b"] holds a Tuple
            continue
        elts = node.elts
        if len(elts) >= 2 and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts
        ):
            yield node.lineno, frozenset(e.value for e in elts)  # type: ignore[attr-defined]


def _python_files() -> list[Path]:
    return [
        p
        for d in ("nmt", "tests", "scripts")
        for p in sorted((REPO / d).rglob("*.py"))
        if p != SCHEMA
    ]


def test_schema_declares_the_enumerations():
    enums = _enumerations()
    for names in (
        schema.ATTENTION_TYPES,
        schema.LOCAL_KINDS,
        schema.PRECISIONS,
        schema.LENGTH_PENALTIES,
        schema.SCORE_KINDS,
    ):
        assert frozenset(names) in enums
    assert set(schema.LOCAL_KINDS) | set(schema.SCORE_KINDS) < set(schema.ATTENTION_TYPES)


def test_finder_sees_a_second_list():
    source = 'KINDS = ["local_p", "local_m"]\nx: Literal["gnmt", "none", "average"]\n'
    assert [names for _, names in _string_collections(source)] == [
        frozenset(schema.LOCAL_KINDS),
        frozenset(schema.LENGTH_PENALTIES),
    ]


def test_no_enumeration_is_spelt_out_twice():
    enums = _enumerations()
    again = [
        f"{p.relative_to(REPO)}:{line} {sorted(names)}"
        for p in _python_files()
        for line, names in _string_collections(p.read_text(encoding="utf-8"))
        if names in enums
    ]
    assert not again, (
        "enumerations of nmt/config/schema.py written again (use its "
        "get_args names): " + "; ".join(again)
    )


def test_search_defaults_are_not_numbers_written_again():
    written = []
    for path in sorted((REPO / "nmt").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                args = node.args
                named = args.posonlyargs + args.args
                with_default = named[len(named) - len(args.defaults) :]
                pairs: list[tuple[str, ast.expr]] = [
                    (a.arg, d) for a, d in zip(with_default, args.defaults, strict=True)
                ]
                pairs += [
                    (a.arg, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d
                ]
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                # dataclass fields
                pairs = [(node.target.id, node.value)] if node.value else []
            else:
                continue
            for name, default in pairs:
                if (
                    name in SEARCH_PARAMETERS
                    and path != SCHEMA
                    and isinstance(default, ast.Constant)
                    and default.value is not None
                ):
                    written.append(f"{path.relative_to(REPO)}:{default.lineno} {name}")
    assert not written, "search defaults written again (take them from SearchConfig): " + "; ".join(
        written
    )
