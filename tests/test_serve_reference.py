"""The reference word alignment on the ``nmt serve`` page (nmt/serve/reference.py): which
test line a source is, its links (joined sets shifted), the per-head agreement on
hand-made weights, the answers without alignment files, and ``POST
/api/reference_alignment`` on the tiny models (slow)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")

from nmt.config.schema import DataConfig
from nmt.data import stored
from nmt.data.stored import alignment_dir
from nmt.evaluation.alignment import parse_pharaoh
from nmt.serve import reference, testsets
from nmt.serve.reference import ReferenceAlignments, answer, model_view

SRC = ["Ein Hund läuft .", "Zwei  Katzen schlafen"]  # the double space is no word
REF = ["A dog runs .", "Two cats sleep"]
GDFA = ["0-0 1-1 2-2 3-3", "0-0 1-1 2-2"]


def corpus(
    folder: Path,
    gdfa: list[str] | None = GDFA,
    src: list[str] = SRC,
    ref: list[str] = REF,
) -> tuple[testsets.TestSets, Path]:
    """Test sets of a two-line split ``t`` (as distributed and joined k = 1, 2), with its
    alignment file unless ``gdfa`` is None; returns the sets and the alignment folder."""
    (folder / "t.de").write_text("\n".join(src) + "\n", encoding="utf-8")
    (folder / "t.en").write_text("\n".join(ref) + "\n", encoding="utf-8")
    aligned = folder / "alignments"
    aligned.mkdir()
    if gdfa is not None:
        (aligned / "t.de-en.gdfa").write_text("\n".join(gdfa) + "\n", encoding="utf-8")
    defs = [testsets.SetDefinition("t", "t"), testsets.SetDefinition("t_joined", "t", (1, 2))]
    return testsets.TestSets(DataConfig(source="dir", path=str(folder)), defs), aligned


def test_a_test_line_is_found_with_its_links_and_a_joined_line_shifted(tmp_path: Path) -> None:
    sets, folder = corpus(tmp_path)
    refs = ReferenceAlignments(sets, folder, "de", "en")
    assert refs.problems() == []
    one = refs.find("Zwei Katzen   schlafen")  # white space aside
    assert one is not None and (one.set, one.line) == ("t", 1)
    assert one.links == parse_pharaoh("0-0 1-1 2-2") and one.reference == REF[1]
    joined = refs.find("Ein Hund läuft . Zwei Katzen schlafen")  # k = 2: line 2 of t_joined
    assert joined is not None and (joined.set, joined.line) == ("t_joined", 2)
    # the second caption's links move by the first's 4 source and 4 target words
    assert joined.links == parse_pharaoh("0-0 1-1 2-2 3-3 4-4 5-5 6-6")
    assert refs.find("Ein Hund schläft .") is None


def test_the_reference_on_the_page_picks_among_lines_of_one_source(tmp_path: Path) -> None:
    refs_text = ["A dog runs .", "One dog is running ."]
    sets, folder = corpus(tmp_path, [GDFA[0]] * 2, [SRC[0]] * 2, refs_text)
    refs = ReferenceAlignments(sets, folder, "de", "en")
    assert refs.find("Ein Hund läuft .").line == 0  # type: ignore[union-attr]
    assert refs.find("Ein Hund läuft .", "One dog is running .").line == 1  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("gdfa", "why"),
    [
        (None, "is missing (scripts/align_multi30k.py writes it)"),
        (["0-0"], "1 lines for a test set of 2 pairs"),
        (["0-0 9-0", "0-0"], "link 9-0 outside the pair"),
        (["0-0 x", "0-0"], "expected i-j pairs"),
    ],
)
def test_no_usable_file_answers_null_and_says_why(
    tmp_path: Path, gdfa: list[str] | None, why: str
) -> None:
    sets, folder = corpus(tmp_path, gdfa)
    refs = ReferenceAlignments(sets, folder, "de", "en")
    problems = refs.problems()  # what nmt serve logs at start-up, before any request
    assert len(problems) == 1 and why in problems[0] and "t.de-en.gdfa" in problems[0]
    body = answer(SimpleNamespace(models={}), refs, SRC[0], None, [])  # type: ignore[arg-type]
    assert body["alignment"] is None
    # line 1 of the page's list is the API's line (the examples' id) 0: the note says both
    assert body["note"].startswith("t line 1 (id 0): ") and why in body["note"]
    none = answer(SimpleNamespace(models={}), refs, "not a test line", None, [])  # type: ignore[arg-type]
    assert none == {"alignment": None, "note": None}


def test_alignment_dir_is_found_from_the_project_root(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "here").mkdir()
    assert alignment_dir(Path("here")) == Path("here")
    monkeypatch.setattr(stored, "PROJECT_ROOT", tmp_path / "root")
    (tmp_path / "root" / "there").mkdir(parents=True)
    assert alignment_dir(Path("there")) == tmp_path / "root" / "there"
    assert alignment_dir(Path("nowhere")) == Path("nowhere") and alignment_dir(None) is None


# pieces of "Ein Hund läuft ." / "A dog runs .": words Ein, Hund, läu|ft, . and A, dog, runs, .
SP = ["▁Ein", "▁Hund", "▁läu", "ft", "▁.", "</s>"]
TP = ["▁A", "▁dog", "▁run", "s", "▁.", "</s>"]


def toy_weights() -> torch.Tensor:
    """(2, 6, 6): head 1 looks at the diagonal word by word, head 2 one word to the left
    (word 0 at word 0), so head 1 has every reference link and head 2 only 0-0."""
    diag = [0, 1, 2, 2, 4, 5]  # source piece per target piece, by word: A-Ein, dog-Hund, ...
    left = [0, 0, 1, 1, 2, 5]
    w = torch.full((2, 6, 6), 0.01)
    for t in range(6):
        w[0, t, diag[t]] = 1.0
        w[1, t, left[t]] = 1.0
    return w / w.sum(-1, keepdim=True)


def test_model_view_scores_each_head_and_the_mean_on_hand_made_weights(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sets, folder = corpus(tmp_path)
    line = ReferenceAlignments(sets, folder, "de", "en").find(SRC[0])
    assert line is not None
    w = toy_weights()
    monkeypatch.setattr(reference, "forced_weights", lambda *a, **k: {0: (w, SP, TP)})
    entry = SimpleNamespace(
        id="toy", fixed_vector=False, loaded=SimpleNamespace(model=0, src_vocab=0, tgt_vocab=0)
    )
    view = model_view(entry, line, threads=1)  # type: ignore[arg-type]
    assert view["src_word"] == [0, 1, 2, 2, 3, -1] and view["tgt_word"] == [0, 1, 2, 2, 3, -1]
    assert torch.tensor(view["heads"]).shape == (2, 6, 6)
    assert torch.allclose(torch.tensor(view["attention"]), w.mean(0), atol=1e-5)
    rows = {r["head"]: r for r in view["agreement"]}
    assert list(rows) == ["1", "2", "mean"]
    assert (rows["1"]["precision"], rows["1"]["recall"], rows["1"]["aer"]) == (1.0, 1.0, 0.0)
    assert rows["1"]["links"] == [[0, 0], [1, 1], [2, 2], [3, 3]]
    # head 2: A-Ein, dog-Ein, runs-Hund, .-läuft: 1 of 4 right, so P = R = 1/4, AER 3/4
    assert rows["2"]["links"] == [[0, 0], [0, 1], [1, 2], [2, 3]]
    assert (rows["2"]["precision"], rows["2"]["recall"], rows["2"]["aer"]) == (0.25, 0.25, 0.75)
    # the mean: A-Ein; dog a tie of Ein and Hund, the first wins; runs and "." lean to
    # läuft, a word of two pieces whose background weights add up: 2 of 4 right
    assert rows["mean"]["links"] == [[0, 0], [0, 1], [2, 2], [2, 3]]
    assert (rows["mean"]["precision"], rows["mean"]["recall"], rows["mean"]["aer"]) == (
        0.5,
        0.5,
        0.5,
    )
    monkeypatch.setattr(reference, "forced_weights", lambda *a, **k: {0: (w[:1], SP, TP)})
    one = model_view(entry, line, threads=1)  # type: ignore[arg-type]
    assert [r["head"] for r in one["agreement"]] == ["1"] and one["heads"] is None
    monkeypatch.setattr(reference, "forced_weights", lambda *a, **k: {})
    assert "do not give back" in model_view(entry, line, 1)["note"]  # type: ignore[arg-type]
    entry.loaded.cfg = SimpleNamespace(data=SimpleNamespace(src_lang="en", tgt_lang="de"))
    assert model_view(entry, line, 1, ("de", "en"))["note"] == (  # type: ignore[arg-type]
        "translates en->de, the alignment is de-en"
    )
    fixed = SimpleNamespace(id="none", fixed_vector=True)
    assert model_view(fixed, line, 1) == {  # type: ignore[arg-type]
        "model": "none",
        "note": "the fixed-vector model has no attention to compare",
    }


# --- the API on the tiny models ------------------------------------------------------


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    from fastapi.testclient import TestClient
    from serve_support import build_app, diagonal_alignments, tiny_models

    models = tiny_models(tmp_path_factory)
    folder = diagonal_alignments(tmp_path_factory.mktemp("alignments"))
    with (
        TestClient(build_app(models, alignments=folder)) as c,
        TestClient(build_app(models, alignments=tmp_path_factory.mktemp("empty"))) as bare,
        TestClient(build_app(models, alignments=folder, threads=2)) as two,
    ):
        yield c, bare, models, two


@pytest.mark.slow
def test_api_attaches_the_alignment_to_a_covered_test_line(served: Any) -> None:
    from nmt.analysis.heads_alignment import forced_weights, model_alignment
    from nmt.model.checkpoint import load_checkpoint

    client, bare, models, two = served
    ex = client.get("/api/examples", params={"split": "test_2016_flickr", "limit": 3}).json()
    line = ex["examples"][2]
    r = client.post("/api/reference_alignment", json={"line": line["source"]})
    assert r.status_code == 200, r.text
    a = r.json()["alignment"]
    assert (a["set"], a["line"], a["reference"]) == ("test_2016_flickr", 2, line["reference"])
    assert "not gold" in r.json()["note"] and a["file"].endswith("test_2016_flickr.de-en.gdfa")
    n = min(len(line["source"].split()), len(line["reference"].split()))
    assert a["links"] == [[k, k] for k in range(n)]
    # read as a search reads, on one thread beside the others: the same at --threads 2
    assert two.post("/api/reference_alignment", json={"line": line["source"]}).json() == r.json()
    views = {m["model"]: m for m in a["models"]}
    assert views["none"]["note"] and "agreement" not in views["none"]
    mh = views["multihead"]
    assert [r["head"] for r in mh["agreement"]] == ["1", "2", "mean"]
    T, S = len(mh["tgt_pieces"]), len(mh["src_pieces"])
    assert torch.tensor(mh["heads"]).shape == (2, T, S) and len(mh["attention"]) == T
    # the numbers are nmt heads' for this one sentence
    m = load_checkpoint(models["multihead"], "cpu")
    got = forced_weights(m.model, m.src_vocab, m.tgt_vocab, [line["source"]], [line["reference"]])
    heads = model_alignment("mh", got, [parse_pharaoh(" ".join(f"{i}-{j}" for i, j in a["links"]))])
    for row, mine in zip(heads.rows, mh["agreement"], strict=True):
        assert (row.head, round(row.aer, 4), round(row.precision, 4)) == (
            mine["head"],
            mine["aer"],
            mine["precision"],
        )
    assert [r["head"] for r in views["additive"]["agreement"]] == ["1"]
    # one model asked for; unknown and repeated models are refused
    only = client.post(
        "/api/reference_alignment", json={"line": line["source"], "models": ["additive"]}
    )
    assert [m["model"] for m in only.json()["alignment"]["models"]] == ["additive"]
    assert (
        client.post("/api/reference_alignment", json={"line": "x", "models": ["nope"]}).status_code
        == 404
    )
    twice = {"line": "x", "models": ["additive", "additive"]}
    assert client.post("/api/reference_alignment", json=twice).status_code == 400
    assert client.post("/api/reference_alignment", json={"line": "x" * 3000}).status_code == 422
    paths = client.get("/openapi.json").json()["paths"]
    codes = set(paths["/api/reference_alignment"]["post"]["responses"])
    assert codes == {"200", "400", "404", "413", "422"}  # 413: the body limit
    # not a test line: nothing; a server without the files: nothing, and it says why
    other = client.post("/api/reference_alignment", json={"line": "Ein Hund."}).json()
    assert other == {"alignment": None, "note": None}
    without = bare.post("/api/reference_alignment", json={"line": line["source"]}).json()
    assert without["alignment"] is None and "is missing" in without["note"]
