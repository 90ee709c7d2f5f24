"""Layering of nmt/: data flows one way (training never imports search or evaluation; the
metrics never need torch), no import circle, every module says what it does, and the
README's layout table lists every module."""

import ast
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "nmt"
MODULES = sorted(p.stem for p in PKG.glob("*.py"))


def _imports(module: str) -> set[str]:
    tree = ast.parse((PKG / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def _nmt_imports(source: str) -> set[str]:
    """The nmt modules (file stems) that ``source`` imports anywhere, function bodies
    included: ``import nmt.x``, ``from nmt.x import y``, ``from nmt import x`` and the
    relative forms ``from .x import y`` and ``from . import x``."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative to the nmt package, which has no subpackages
                base = "nmt" + (f".{base}" if base else "")
            dotted = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in dotted:
            parts = name.split(".")
            if parts[0] != "nmt":
                continue
            if len(parts) == 1:
                found.add("__init__")
            elif parts[1] in MODULES:
                found.add(parts[1])
    return found


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as ``[a, b, ..., a]``, or None when there is none."""
    state: dict[str, str] = {}  # "open" while on the DFS path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_training_does_not_know_about_search_or_evaluation():
    for module in ["train", "model", "decoder", "encoder", "attention", "data", "checkpoint"]:
        bad = {"nmt.search", "nmt.metrics", "nmt.translate", "nmt.evaluate"} & _imports(module)
        assert not bad, f"nmt/{module}.py imports {bad}"


def test_metrics_modules_do_not_need_torch():
    for module in ["metrics", "bootstrap", "longsets"]:
        assert not {"torch"} & {n.split(".")[0] for n in _imports(module)}, module


def test_search_knows_nothing_about_model_internals():
    assert not {"nmt.decoder", "nmt.encoder", "nmt.attention", "nmt.model"} & _imports("search")


def test_import_parser_sees_every_form():
    source = ("import nmt.vocab\nfrom nmt.data import collate\nfrom nmt import search\n"
              "from .model import build_model\nfrom . import train\nimport os, nmt\n"
              "def f():\n    from nmt.metrics import score\n")
    assert _nmt_imports(source) == {"vocab", "data", "search", "model", "train", "__init__",
                                    "metrics"}


def test_cycle_finder_finds_a_circle_and_only_a_circle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_in_nmt():
    graph = {m: _nmt_imports((PKG / f"{m}.py").read_text()) - {m} for m in MODULES}
    cycle = _find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(f"nmt/{m}.py" for m in cycle)


def test_every_module_has_a_docstring():
    missing = [m for m in MODULES
               if not (ast.get_docstring(ast.parse((PKG / f"{m}.py").read_text())) or "").strip()]
    assert not missing, f"modules without a docstring: {missing}"


def _readme_layout() -> list[str]:
    """The file names in the first column of the README's "Layout" table, in order."""
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    listed = []
    for row in section.splitlines():
        if row.startswith("|"):
            first_cell = row.strip("|").split("|")[0]
            listed += re.findall(r"`(?:nmt/)?([A-Za-z0-9_]+\.py)`", first_cell)
    return listed


def test_readme_layout_table_lists_exactly_the_modules():
    listed = _readme_layout()
    assert len(listed) == len(set(listed)), f"listed twice: {sorted(listed)}"
    assert sorted(listed) == sorted(f"{m}.py" for m in MODULES)


def test_each_module_imports_only_modules_above_it_in_the_readme_layout():
    order = [name.removesuffix(".py") for name in _readme_layout()]
    for i, module in enumerate(order):
        below = _nmt_imports((PKG / f"{module}.py").read_text()) & set(order[i + 1:])
        assert not below, f"nmt/{module}.py imports {sorted(below)}, listed below it in README"
