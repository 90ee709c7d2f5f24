"""Data flows one way: training never imports search or scoring; scoring never needs torch."""

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[1] / "nmt"


def _imports(module: str) -> set[str]:
    tree = ast.parse((PKG / f"{module}.py").read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_training_does_not_know_about_search_or_evaluation():
    for module in ["train", "model", "decoder", "encoder", "attention", "data", "checkpoint"]:
        bad = {"nmt.search", "nmt.metrics", "nmt.translate", "nmt.evaluate"} & _imports(module)
        assert not bad, f"nmt/{module}.py imports {bad}"


def test_scoring_modules_do_not_need_torch():
    for module in ["metrics", "bootstrap", "longsets"]:
        assert not {"torch"} & {n.split(".")[0] for n in _imports(module)}, module


def test_search_knows_nothing_about_model_internals():
    assert not {"nmt.decoder", "nmt.encoder", "nmt.attention", "nmt.model"} & _imports("search")
