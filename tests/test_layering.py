"""Layering of nmt/: subpackages in one order, imports pointing only down it, no import
circle, small modules that each say what they do, and the metrics free of torch.

The map is ``LAYERS`` below, in code; the README's layout tree is prose about it."""

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PKG = REPO / "nmt"

# Data flows down this list: a module may import its own subpackage and the ones above it.
LAYERS = [
    "config",
    "ops",
    "evaluation",
    "data",
    "model",
    "training",
    "inference",
    "analysis",
    "study",
    "commands",
    "serve",
    "cli",
]
MAX_LINES = 400


def _modules() -> dict[str, Path]:
    """Every module of nmt/ by dotted name (``nmt.model.decoder``)."""
    out = {}
    for path in sorted(PKG.rglob("*.py")):
        rel = path.relative_to(REPO).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _nmt_imports(source: str, module: str) -> set[str]:
    """The nmt modules that ``source`` (of ``module``) imports anywhere, function bodies
    included: ``import nmt.x.y``, ``from nmt.x.y import z`` (``z`` counted when it is a
    module), ``from nmt.x import y`` and the relative forms."""
    is_package = (PKG / "/".join(module.split(".")[1:]) / "__init__.py").exists()
    package = module.split(".") if is_package else module.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = package[: len(package) - node.level + 1]
                base = ".".join(anchor + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            dotted = [base] + [f"{base}.{a.name}" for a in node.names]
        else:
            continue
        for name in dotted:
            while name and name not in MODULES:
                name = name.rpartition(".")[0]
            if name.startswith("nmt"):
                found.add(name)
    return found - {module}


def _layer(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in LAYERS else None


def _graph() -> dict[str, set[str]]:
    return {m: _nmt_imports(p.read_text(encoding="utf-8"), m) for m, p in MODULES.items()}


def _find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` as ``[a, b, ..., a]``, or None when there is none."""
    state: dict[str, str] = {}  # "open" while on the DFS path, "done" after
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_every_subpackage_is_a_layer_and_every_layer_exists():
    subpackages = {p.parent.name for p in PKG.glob("*/__init__.py")}
    assert subpackages == set(LAYERS)
    top = {p.stem for p in PKG.glob("*.py")}
    assert top == {"__init__", "__main__"}, f"modules outside the layers: {top}"


def test_imports_point_down_the_layers():
    rank = {name: i for i, name in enumerate(LAYERS)}
    bad = []
    for module, imported in _graph().items():
        here = _layer(module)
        if here is None:
            continue
        for other in imported:
            there = _layer(other)
            if there is not None and rank[there] > rank[here]:
                bad.append(f"{module} imports {other}")
    assert not bad, "imports pointing up the layers: " + "; ".join(sorted(bad))


def test_training_does_not_know_about_search_or_evaluation():
    for module, imported in _graph().items():
        if module.startswith(("nmt.training", "nmt.model", "nmt.data")):
            bad = {m for m in imported if m.startswith(("nmt.inference", "nmt.evaluation"))}
            assert not bad, f"{module} imports {bad}"


def test_evaluation_does_not_need_torch():
    for module, path in MODULES.items():
        if module.startswith("nmt.evaluation") or module == "nmt.data.longsets":
            tree = ast.parse(path.read_text(encoding="utf-8"))
            names = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
            names |= {
                n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module
            }
            assert "torch" not in {n.split(".")[0] for n in names}, module


def test_search_knows_nothing_about_model_internals():
    imported = _graph()["nmt.inference.search"]
    assert not {m for m in imported if m.startswith("nmt.model")}


def test_import_parser_sees_every_form():
    source = (
        "import nmt.data.vocab\nfrom nmt.data.batches import collate\n"
        "from nmt.inference import search\nfrom ..model.seq2seq import build_model\n"
        "from . import loop\nimport os, nmt\n"
        "def f():\n    from nmt.evaluation.metrics import score\n"
    )
    assert _nmt_imports(source, "nmt.training.schedule") == {
        "nmt.data.vocab",
        "nmt.data.batches",
        "nmt.inference",
        "nmt.inference.search",
        "nmt.model.seq2seq",
        "nmt.training",
        "nmt.training.loop",
        "nmt",
        "nmt.evaluation.metrics",
    }


def test_cycle_finder_finds_a_circle_and_only_a_circle():
    assert _find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None


def test_no_import_circle_in_nmt():
    cycle = _find_cycle(_graph())
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def test_every_module_has_a_docstring():
    missing = [
        m
        for m, p in MODULES.items()
        if not (ast.get_docstring(ast.parse(p.read_text(encoding="utf-8"))) or "").strip()
    ]
    assert not missing, f"modules without a docstring: {missing}"


def test_every_module_is_small():
    sizes = {m: len(p.read_text(encoding="utf-8").splitlines()) for m, p in MODULES.items()}
    big = {m: n for m, n in sizes.items() if n > MAX_LINES}
    assert not big, f"modules over {MAX_LINES} lines (split them by responsibility): {big}"


# STYLE.md: functions under ~60 lines. A body is counted without its docstring, nested
# functions included. The one exception is a loop whose parts share its whole state:
# split, it would pass an anonymous many-tuple back and forth.
MAX_FUNCTION_LINES = 60
LONG_FUNCTIONS = {"nmt.inference.search.beam_search"}


def _long_functions(source: str, module: str) -> dict[str, int]:
    """``module.function`` -> body lines (docstring excluded) of every function or method
    of ``source`` whose body is longer than :data:`MAX_FUNCTION_LINES`."""
    out = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body[1:] if ast.get_docstring(node) is not None else node.body
        end = body[-1].end_lineno if body else None
        if end is not None and (n := end - body[0].lineno + 1) > MAX_FUNCTION_LINES:
            out[f"{module}.{node.name}"] = n
    return out


def test_long_function_finder_counts_the_body_without_the_docstring():
    lines = "\n".join(f"    x{i} = {i}" for i in range(MAX_FUNCTION_LINES))
    short = f'def f():\n    """Doc\n    more."""\n{lines}\n'
    assert _long_functions(short, "m") == {}
    assert _long_functions(short + "    return 1\n", "m") == {"m.f": MAX_FUNCTION_LINES + 1}


def test_every_function_is_short():
    found = {}
    for m, p in MODULES.items():
        found.update(_long_functions(p.read_text(encoding="utf-8"), m))
    long = {f: n for f, n in found.items() if f not in LONG_FUNCTIONS}
    assert not long, f"function bodies over {MAX_FUNCTION_LINES} lines (split them): {long}"


# nmt/commands/ holds one composition root per verb, each named after its verb; what two
# verbs share, and a verb's helpers, belong to a library layer below (issue 51)
VERBS = {"train", "evaluate", "translate", "average", "select", "heads", "bench", "study", "export"}
COMMANDS_MAX_LINES = 1800


def test_commands_holds_one_module_per_verb():
    names = {m.split(".")[2] for m in MODULES if m.startswith("nmt.commands.")}
    assert names <= VERBS, f"commands/ modules that are not a verb: {names - VERBS}"


def test_no_commands_module_imports_another():
    found = {
        f"{m} imports {o}"
        for m, imported in _graph().items()
        if m.startswith("nmt.commands.")
        for o in imported
        if o.startswith("nmt.commands")
    }
    assert not found, "verbs importing other commands modules: " + "; ".join(sorted(found))


def test_commands_stays_composition_sized():
    lines = sum(
        len(p.read_text(encoding="utf-8").splitlines())
        for m, p in MODULES.items()
        if m.startswith("nmt.commands")
    )
    assert lines < COMMANDS_MAX_LINES, (
        f"nmt/commands/ has {lines} lines: move library logic to the layer it belongs to"
    )


def test_the_study_is_its_own_subpackage():
    assert not [m for m in MODULES if m.startswith("nmt.commands.study_")]
    assert {"nmt.study.plan", "nmt.study.decode", "nmt.study.report"} <= set(MODULES)
