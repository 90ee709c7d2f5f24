"""Two test tiers: every test that trains a model or serves one carries the ``slow`` marker
(``pytest -m "not slow"`` runs the fast tier alone; the README's test command runs both),
and no test reads a clock to judge speed."""

from __future__ import annotations

import ast
import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# what training or serving looks like in a test: the CLI verbs that train or serve, the
# training loop (also through conftest's bare_trainer), the serve app and its fixtures, torchrun
TRAINS_OR_SERVES = re.compile(
    r"""\b_?nmt\(\s*["'](train|serve|study)["']|["']nmt["'],\s*["'](train|serve|study)["']"""
    r"""|\b(bare_t|T)rainer\(|(?<![.\w])train\(|\brun_training\(|\bTestClient\(|\btiny_models\b"""
    r"""|\blive_server\(|\bbuild_app\(|\btorchrun\(|\brun_tiny_study\("""
)
CLOCKS = re.compile(r"\btime\.(perf_counter|monotonic|time)\(\)")


def _is_slow_mark(node: ast.expr) -> bool:
    return ast.unparse(node).replace("pytest.", "").startswith("mark.slow")


def _unmarked(source: str) -> list[str]:
    """Test functions of ``source`` that train or serve (themselves, or through a helper
    function or fixture of the same file) without the ``slow`` marker."""
    tree = ast.parse(source)
    module_slow = any(
        isinstance(n, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == "pytestmark" for t in n.targets)
        and "mark.slow" in ast.unparse(n.value)
        for n in tree.body
    )
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    helpers = {
        f.name
        for f in functions
        if not f.name.startswith("test_")
        and TRAINS_OR_SERVES.search(ast.get_source_segment(source, f) or "")
    }
    out = []
    for f in functions:
        if (
            not f.name.startswith("test_")
            or module_slow
            or any(map(_is_slow_mark, f.decorator_list))
        ):
            continue
        text = ast.get_source_segment(source, f) or ""
        # a helper is used where its name is code (a call, a fixture argument), not where
        # the word stands in a string ("the corpus it was trained on" is not `trained`)
        names = {n.id for n in ast.walk(f) if isinstance(n, ast.Name)}
        names |= {a.arg for a in f.args.args}
        if TRAINS_OR_SERVES.search(text) or helpers & names:
            out.append(f.name)
    return out


def test_finder_sees_training_through_a_helper_and_honours_the_marks():
    source = (
        "import pytest\n"
        "def run(tmp):\n    nmt('train', 'c.yaml')\n"
        "def test_a(tmp_path):\n    run(tmp_path)\n"
        "@pytest.mark.slow\ndef test_b(tmp_path):\n    run(tmp_path)\n"
        "def test_c():\n    assert 1 + 1 == 2\n"
        "def test_d():\n    assert 'run' in 'what to run'\n"
        "def test_e(run):\n    pass\n"
    )
    assert _unmarked(source) == ["test_a", "test_e"]  # test_d only names it in a string
    assert _unmarked("import pytest\npytestmark = pytest.mark.slow\n" + source) == []


def test_every_test_that_trains_or_serves_is_marked_slow():
    unmarked = {
        p.name: names
        for p in sorted(TESTS.glob("test_*.py"))
        if p != Path(__file__)
        if (names := _unmarked(p.read_text(encoding="utf-8")))
    }
    assert not unmarked, f"tests that train or serve without @pytest.mark.slow: {unmarked}"


def _clock_assertions(source: str) -> list[int]:
    """Lines of assertions on a measured duration: a clock reading minus something, written
    in the assertion or in a name it reads. A deadline (``clock() < deadline``) that fails a
    hung wait is no measurement and passes."""

    def measures(node: ast.AST) -> bool:
        return any(
            isinstance(n, ast.BinOp) and isinstance(n.op, ast.Sub) and CLOCKS.search(ast.unparse(n))
            for n in ast.walk(node)
        )

    tree = ast.parse(source)
    durations = {
        t.id
        for n in ast.walk(tree)
        if isinstance(n, ast.Assign) and measures(n.value)
        for t in n.targets
        if isinstance(t, ast.Name)
    }
    return [
        n.lineno
        for n in ast.walk(tree)
        if isinstance(n, ast.Assert)
        and (
            measures(n.test)
            or {x.id for x in ast.walk(n.test) if isinstance(x, ast.Name)} & durations
        )
    ]


def test_clock_finder_tells_a_measurement_from_a_deadline():
    source = (
        "import time\nt0 = time.monotonic()\nassert time.monotonic() - t0 < 3\n"
        "wall = time.perf_counter() - t0\nassert wall < 1\n"
        "assert time.monotonic() < t0 + 60\n"
    )
    assert _clock_assertions(source) == [3, 5]


def test_no_test_asserts_on_wall_clock_time():
    found = [
        f"{p.name}:{line}"
        for p in sorted(TESTS.glob("test_*.py"))
        for line in _clock_assertions(p.read_text(encoding="utf-8"))
    ]
    assert not found, f"assertions on wall-clock time: {found}"
