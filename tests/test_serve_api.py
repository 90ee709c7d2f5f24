"""``nmt serve``'s JSON API through FastAPI's TestClient, on three tiny models (additive,
none, multihead) trained once per session: the shapes of the attention and token arrays,
the alignment against ``nmt translate --attention``, n-best order, forced prefixes, every
limit and error code, the bounded queue, and concurrent against sequential requests."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx (the dev extra)")

from fastapi.testclient import TestClient
from serve_support import LINES, REPO, build_app, synthetic_study, tiny_models

pytestmark = pytest.mark.slow  # every test here trains or serves a model

REAL_STUDY = REPO / "reports" / "deen_long_study"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory)


@pytest.fixture(scope="module")
def client(
    models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[TestClient]:
    synthetic = synthetic_study(tmp_path_factory.mktemp("study") / "synthetic")
    with TestClient(build_app(models, [REAL_STUDY, synthetic])) as c:  # one event loop
        yield c


def post(client: TestClient, **body: Any) -> Any:
    return client.post("/api/translate", json=body)


def ok(client: TestClient, **body: Any) -> dict[str, Any]:
    r = post(client, **body)
    assert r.status_code == 200, r.text
    return r.json()


def without_times(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: without_times(v) for k, v in x.items() if k != "time_ms"}
    if isinstance(x, list):
        return [without_times(v) for v in x]
    return x


def test_health_and_models(client: TestClient, models: dict[str, Path]) -> None:
    h = client.get("/api/health").json()
    assert h["status"] == "ok" and h["models"] == ["additive", "none", "multihead"]
    assert h["threads"] == 1
    info = client.get("/api/models").json()
    assert info["default"] == ["additive", "none"]
    assert info["limits"] == {
        "max_lines": 32,
        "max_chars": 2000,
        "max_pieces": 400,
        "max_beam": 16,
        "max_body_bytes": 1 << 20,
        "max_search_work": 64_000,
        "max_answer_numbers": 5_000_000,
    }
    by_id = {m["id"]: m for m in info["models"]}
    for mid, m in by_id.items():
        assert m["direction"] == "de->en" and m["attention"] == mid
        assert m["step_order"] == "bahdanau" and m["parameters"] > 1000
        assert m["decoding"]["beam_size"] == 3 and m["decoding"]["precision"] == "fp32"
        assert m["sha256"] == hashlib.sha256(models[mid].read_bytes()).hexdigest()
        assert m["test_bleu"] is None and isinstance(m["val_bleu"], float)
        assert m["test_bleu_stale"] is None
    assert by_id["none"]["fixed_vector"] and not by_id["additive"]["fixed_vector"]
    assert by_id["multihead"]["heads"] == 2


def test_test_bleu_stored_beside_the_checkpoint(models: dict[str, Path], tmp_path: Path) -> None:
    import torch

    from nmt.serve.registry import load_entry

    ck = tmp_path / "best.pt"
    shutil.copy(models["none"], ck)
    (tmp_path / "select.json").write_text(
        json.dumps(
            {
                "chosen_checkpoint": str(ck),
                "beam": 5,
                "alpha": 1.0,
                "test": {"test_2016_flickr": {"beam_bleu": 12.5, "signature": "nrefs:1|tok:13a"}},
            }
        )
    )
    entry = load_entry("n", ck, torch.device("cpu"), 1)
    tb = entry.info["test_bleu"]
    assert tb["bleu"] == 12.5 and tb["split"] == "test_2016_flickr"
    assert tb["signature"] == "nrefs:1|tok:13a" and tb["file"] == "select.json"


def test_translate_shapes_scores_and_nbest_order(client: TestClient) -> None:
    d = ok(
        client,
        lines=LINES[:2],
        models=["multihead", "additive", "none"],
        beam=3,
        n_best=3,
        top_k=2,
        references=["A man rides a bike.", None],
    )
    assert [r["model"] for r in d["results"]] == ["multihead", "additive", "none"]
    assert d["time_ms"] > 0 and d["bleu_signature"].startswith("nrefs:1")
    for r in d["results"]:
        assert r["time_ms"] > 0 and len(r["lines"]) == 2
        for i, line in enumerate(r["lines"]):
            S = len(line["src_pieces"])
            assert line["src_pieces"][-1] == "</s>" and line["source"] == LINES[i]
            assert not line["truncated"] and not line["unknown"]
            assert line["fixed_vector"] == (r["model"] == "none") == r["fixed_vector"]
            hyps = line["hypotheses"]
            assert len(hyps) == 3
            # complete hypotheses first, by score, then those cut at the length limit
            order = [(not h["complete"], -h["score"]) for h in hyps]
            assert order == sorted(order)
            assert line["tgt_pieces"] == hyps[0]["tgt_pieces"] and line["text"] == hyps[0]["text"]
            for h in hyps:
                T = len(h["tgt_pieces"])
                assert len(h["token_logprobs"]) == T and all(x <= 0 for x in h["token_logprobs"])
                assert h["log_prob"] == pytest.approx(sum(h["token_logprobs"]), abs=1e-4)
                assert len(h["top"]) == T and all(len(t) == 2 for t in h["top"])
                assert h["forced"] == 0
                # one cut at the length limit is completed with </s> (docs/serve.md)
                assert h["tgt_pieces"][-1] == "</s>"
                if r["model"] == "none":
                    assert h["attention"] is None and h["alignment"] is None
                    assert h["heads"] is None
                    continue
                att = h["attention"]
                assert len(att) == T and all(len(row) == S for row in att)
                assert all(abs(sum(row) - 1) < 1e-3 for row in att)
                assert h["alignment"] == [row.index(max(row)) for row in att]
                if r["model"] == "multihead":
                    heads = h["heads"]
                    assert len(heads) == 2 and all(len(x) == T and len(x[0]) == S for x in heads)
                    mean = [
                        [(a + b) / 2 for a, b in zip(ra, rb, strict=True)]
                        for ra, rb in zip(*heads, strict=True)
                    ]
                    assert all(
                        abs(m - a) < 1e-4
                        for rm, ra in zip(mean, att, strict=True)
                        for m, a in zip(rm, ra, strict=True)
                    )
                else:
                    assert h["heads"] is None
            assert (line["bleu"] is None) == (i == 1) and (line["chrf"] is None) == (i == 1)
            assert (hyps[0]["bleu"] is None) == (i == 1)
            if i == 0:
                assert line["len_ratio"] > 0 and 0 <= line["bleu"] <= 100


def test_alignment_and_text_match_nmt_translate(
    client: TestClient, models: dict[str, Path]
) -> None:
    from nmt.inference.translate import one_line
    from nmt.inference.translator import Translator

    for name in ("additive", "multihead", "none"):
        api = ok(client, lines=LINES, models=[name])["results"][0]["lines"]
        ref = Translator.from_checkpoint(models[name], "cpu", threads=1).translate(LINES)
        for line, tr in zip(api, ref, strict=True):
            assert line["text"] == tr.text and line["tgt_pieces"] == tr.tgt_pieces
            assert line["src_pieces"] == tr.src_pieces
            if tr.attention is None:
                assert line["hypotheses"][0]["alignment"] is None
            else:
                assert line["hypotheses"][0]["alignment"] == tr.attention.argmax(1).tolist()
    # and what the command prints: per target piece the most attended source piece
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "translate", str(models["additive"]), "--attention"],
        input=LINES[1] + "\n",
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=600,
    )
    assert r.returncode == 0, r.stderr
    printed = [m.groups() for m in re.finditer(r"^\s*(\S+) <- (\S+)\s+[0-9.]+$", r.stderr, re.M)]
    line = ok(client, lines=[LINES[1]], models=["additive"])["results"][0]["lines"][0]
    h = line["hypotheses"][0]
    # the filter writes each whitespace run as one space (one_line); a lone "▁" piece makes two
    assert r.stdout.strip() == one_line(line["text"])
    pairs = zip(h["tgt_pieces"], h["alignment"], strict=True)
    assert printed == [(t, line["src_pieces"][s]) for t, s in pairs]


def test_forced_prefix_starts_every_hypothesis(client: TestClient) -> None:
    free = ok(client, lines=LINES[:2], beam=3, n_best=2)
    d = ok(client, lines=LINES[:2], beam=3, n_best=2, prefix="Two women")
    assert d["prefix"] == "Two women"
    changed = False
    for rf, rp in zip(free["results"], d["results"], strict=True):
        for lf, lp in zip(rf["lines"], rp["lines"], strict=True):
            for h in lp["hypotheses"]:
                assert h["text"].startswith("Two women") and h["forced"] >= 2
                n = h["forced"]
                assert h["tgt_pieces"][:n] == lp["hypotheses"][0]["tgt_pieces"][:n]
                assert len(h["token_logprobs"]) == len(h["tgt_pieces"])
            order = [(not h["complete"], -h["score"]) for h in lp["hypotheses"]]
            assert order == sorted(order)
            changed |= lf["text"] != lp["text"]
    assert changed
    # greedy continues a prefix too
    g = ok(client, lines=[LINES[0]], beam=1, prefix="A dog", models=["additive"])
    assert g["results"][0]["lines"][0]["text"].startswith("A dog")


@pytest.mark.parametrize(
    "body, limit, value, line, field",
    [
        ({"lines": ["Ein Hund."] * 33}, "max_lines", 33, None, "lines"),
        ({"lines": ["Ein Hund.", "x" * 2001]}, "max_chars", 2001, 1, "lines"),
        ({"lines": ["Ein Hund."], "beam": 17}, "max_beam", 17, None, "beam"),
        (
            {"lines": ["Ein Hund."], "references": ["A dog."] * 33},
            "max_lines",
            33,
            None,
            "references",
        ),
        ({"lines": ["Ein Hund."], "references": ["y" * 2500]}, "max_chars", 2500, 0, "references"),
        ({"lines": ["Ein Hund."], "prefix": "z" * 2001}, "max_chars", 2001, 0, "prefix"),
        ({"lines": ["Ein Hund.", "a " * 999]}, "max_pieces", None, 1, "lines"),
    ],
)
def test_limits_answer_413_naming_limit_value_and_line(
    client: TestClient,
    body: dict[str, Any],
    limit: str,
    value: int | None,
    line: int | None,
    field: str,
) -> None:
    r = post(client, **body)
    assert r.status_code == 413, r.text
    e = r.json()
    assert e["error"] == "limit_exceeded" and e["limit"] == limit and e["field"] == field
    assert (
        e["line"] == line
        and e["max"]
        == {"max_lines": 32, "max_chars": 2000, "max_beam": 16, "max_pieces": 400}[limit]
    )
    assert e["value"] == value if value is not None else e["value"] > 400
    assert limit in e["message"]
    if limit == "max_pieces":
        assert e["model"] == "additive"


def test_truncate_cuts_instead_of_413_and_body_limit(client: TestClient) -> None:
    d = ok(client, lines=["a " * 999], models=["none"], beam=1, truncate=True)
    line = d["results"][0]["lines"][0]
    assert line["truncated"] and len(line["src_pieces"]) == 401
    r = client.post(
        "/api/translate",
        content=b'{"lines": ["' + b"x" * (1 << 20) + b'"]}',
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 413 and r.json()["limit"] == "max_body_bytes"


def test_empty_and_unknown_lines(client: TestClient) -> None:
    d = ok(client, lines=["\U0001f415\U0001f415", LINES[0]], models=["additive"], beam=1)
    emoji, real = d["results"][0]["lines"]
    assert emoji["unknown"] and not real["unknown"] and real["hypotheses"]
    # an empty line is refused, naming it (tests/test_serve_hardening.py has the rest)
    r = post(client, lines=["", LINES[0]], models=["additive"], beam=1)
    assert r.status_code == 422 and r.json()["line"] == 0


@pytest.mark.parametrize(
    "body, status, error",
    [
        ({"lines": ["x"], "beam": 0}, 422, "invalid_request"),
        ({"lines": ["x"], "alpha": -1}, 422, "invalid_request"),
        ({"lines": ["x"], "length_penalty": "long"}, 422, "invalid_request"),
        ({"lines": ["x"], "surprise": 1}, 422, "invalid_request"),
        ({"lines": []}, 422, "invalid_request"),
        ({"lines": "Ein Hund."}, 422, "invalid_request"),
        ({"lines": ["x"], "n_best": 4, "beam": 3}, 400, "bad_option"),
        ({"lines": ["x"], "n_best": 2, "beam": 1}, 400, "bad_option"),
        ({"lines": ["x", "y"], "references": ["a"]}, 400, "bad_option"),
        ({"lines": ["x"], "models": ["none", "none"]}, 400, "bad_option"),
        ({"lines": ["x"], "models": ["transformer"]}, 404, "unknown_model"),
    ],
)
def test_bad_options_and_unknown_models(
    client: TestClient, body: dict[str, Any], status: int, error: str
) -> None:
    r = post(client, **body)
    assert r.status_code == status, r.text
    assert r.json()["error"] == error and r.json()["message"]


def test_other_errors_are_json_never_200(client: TestClient) -> None:
    for method, path, status in (
        ("get", "/api/nothing", 404),
        ("get", "/api/translate", 405),
        ("get", "/api/studies/nope", 404),
        ("get", "/api/examples?split=nope", 404),
        ("get", "/api/examples?split=test_2016_flickr&bucket=x", 400),
        ("get", "/api/examples?split=test_2016_flickr&limit=201", 422),
    ):
        r = getattr(client, method)(path)
        assert r.status_code == status, (path, r.text)
        body = r.json()
        assert body["error"] and body["message"], body


def test_full_queue_answers_429(models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import nmt.serve.batcher as serve_batcher

    app = build_app(models, queue=1, ids=["none"])
    client = TestClient(app)
    release, started = threading.Event(), threading.Event()
    real = serve_batcher.run_jobs

    def slow(*args: Any, **kwargs: Any) -> Any:
        started.set()
        assert release.wait(60)
        return real(*args, **kwargs)

    monkeypatch.setattr(serve_batcher, "run_jobs", slow)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(post, client, lines=[LINES[0]], beam=1)
        assert started.wait(60)
        busy = post(client, lines=[LINES[0]], beam=1)
        release.set()
        assert first.result().status_code == 200
    assert busy.status_code == 429 and busy.json()["error"] == "queue_full"
    assert busy.json()["model"] == "none" and busy.headers["retry-after"] == "1"
    assert post(client, lines=[LINES[0]], beam=1).status_code == 200  # the place came back


def test_concurrent_requests_equal_sequential_ones(client: TestClient) -> None:
    a = {"lines": LINES, "beam": 3, "n_best": 2, "models": ["additive", "multihead"]}
    b = {"lines": [LINES[2], LINES[0]], "beam": 2, "prefix": "A", "models": ["none", "additive"]}
    sequential = [without_times(ok(client, **a)), without_times(ok(client, **b))]
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(ok, client, **a), pool.submit(ok, client, **b)]
        concurrent = [without_times(f.result()) for f in futures]
    assert concurrent == sequential


def test_study_buckets_and_example_ids(client: TestClient) -> None:
    assert [s["name"] for s in client.get("/api/studies").json()["studies"]] == [
        "deen_long_study",
        "synthetic",
    ]
    s = client.get("/api/studies/synthetic").json()
    (ts,) = s["test_sets"]
    assert ts["name"] == "test_2016_flickr" and ts["systems"] == ["none", "additive"]
    assert [b["label"] for b in ts["buckets"]] == ["1-10", "11-20", "21+"]
    assert ts["notes"] == []
    for b in ts["buckets"]:
        assert len(b["example_ids"]) == b["n"] == b["rows"]["none"]["n"]
        row = b["rows"]["additive"]
        assert {"score", "low", "high"} == set(row["bleu"]) and row["len_ratio"] == 0.9
        assert row["brevity_penalty"] == 0.89
    first = ts["buckets"][2]["example_ids"][0]
    ex = client.get(f"/api/examples?split=test_2016_flickr&offset={first}&limit=1").json()
    assert ex["examples"][0]["id"] == first and ex["examples"][0]["words"] >= 21
    real = client.get("/api/studies/deen_long_study").json()
    names = [t["name"] for t in real["test_sets"]]
    assert names == ["test_2016_flickr", "test_2016_flickr_joined"]
    for t in real["test_sets"]:
        assert t["notes"] == [] and len(t["systems"]) == 9
        for b in t["buckets"]:
            assert len(b["example_ids"]) == b["n"]
            assert set(b["rows"]) == set(t["systems"])


def test_testsets_and_examples_by_bucket(client: TestClient) -> None:
    index = {s["name"]: s for s in client.get("/api/testsets").json()["sets"]}
    assert {"test_2016_flickr", "test_2016_flickr_joined", "test_2017_flickr"} <= set(index)
    joined = {b["label"]: b["n"] for b in index["test_2016_flickr_joined"]["buckets"]}
    ex = client.get(
        "/api/examples", params={"split": "test_2016_flickr_joined", "bucket": "31-40", "limit": 3}
    ).json()
    assert ex["total"] == joined["31-40"] > 0 and ex["bucket"] == "31-40"
    assert len(ex["examples"]) == 3 and all(31 <= e["words"] <= 40 for e in ex["examples"])
    nxt = client.get(
        "/api/examples",
        params={"split": "test_2016_flickr_joined", "bucket": "31-40", "limit": 3, "offset": 3},
    ).json()
    assert not {e["id"] for e in ex["examples"]} & {e["id"] for e in nxt["examples"]}
    for label in ("61+", "61-"):
        open_end = client.get(
            "/api/examples", params={"split": "test_2016_flickr_joined", "bucket": label}
        ).json()
        assert open_end["total"] == joined["61+"] and open_end["bucket"] == "61+"


def test_openapi_states_the_limits_and_docs_work_offline(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    body = spec["components"]["schemas"]["TranslateRequest"]["properties"]
    assert body["lines"]["maxItems"] == 32 and body["lines"]["items"]["maxLength"] == 2000
    assert body["beam"]["anyOf"][0]["maximum"] == 16
    assert "413" in spec["paths"]["/api/translate"]["post"]["responses"]
    assert "413" in spec["info"]["description"] and "400 pieces" in spec["info"]["description"]
    docs = client.get("/docs")
    assert docs.status_code == 200 and "swagger" in docs.text.lower()
    if "cdn" not in docs.text:  # fastapi-offline: the page's scripts are served from here
        found = re.search(r'src="([^"]+swagger-ui-bundle\.js)"', docs.text)
        assert found is not None, docs.text
        js = found.group(1)
        assert client.get(js).status_code == 200
    page = client.get("/")
    assert page.status_code == 200
    assert "default-src 'self'" in page.headers["content-security-policy"]
    for name in ("util.js", "heatmap.js", "pane.js", "study.js", "app.js", "style.css"):
        assert client.get(f"/static/{name}").status_code == 200
        text = (REPO / "nmt/serve/static" / name).read_text(encoding="utf-8")
        text = text.replace("http://www.w3.org/2000/svg", "")  # SVG's namespace, not a fetch
        assert "http://" not in text and "https://" not in text, name


def test_safe_defaults_and_bad_command_lines(models: dict[str, Path], tmp_path: Path) -> None:
    from nmt.model.checkpoint import CheckpointError
    from nmt.serve.registry import parse_model_spec
    from nmt.serve.server import ServeOptions, build
    from nmt.serve.studies import StudyError

    assert ServeOptions(models=[]).host == "127.0.0.1"
    assert parse_model_spec("a=x.pt") == ("a", Path("x.pt"))
    with pytest.raises(ValueError, match="the id"):
        parse_model_spec("a b=x.pt")
    with pytest.raises(ValueError, match="the id 'x' is given twice"):
        build(ServeOptions(models=[f"x={models['none']}", f"x={models['additive']}"]))
    with pytest.raises(ValueError, match="at least one --model"):
        build(ServeOptions(models=[]))
    with pytest.raises(CheckpointError):
        build(ServeOptions(models=[f"x={tmp_path / 'missing.pt'}"]))
    (tmp_path / "results.json").write_text("{}")
    with pytest.raises(StudyError, match="not a study report"):
        build(ServeOptions(models=[f"x={models['none']}"], studies=[tmp_path]))
    r = subprocess.run(
        [sys.executable, "-m", "nmt", "serve", "--help"],
        capture_output=True,
        text=True,
        cwd=REPO,
        timeout=300,
    )
    assert r.returncode == 0 and "127.0.0.1" in r.stdout and "--model" in r.stdout


def test_a_body_for_another_route_names_the_field_it_does_not_take(client: TestClient) -> None:
    """{"line": ...} (the reference view's shape) sent to /api/translate: the message says
    that `lines` is missing and that `line` is not a field of this route."""
    r = post(client, line=LINES[0])
    assert r.status_code == 422, r.text
    msg = r.json()["message"]
    assert msg.startswith("lines: Field required; 'line' is not a field here"), msg
    assert '{"lines": [' in msg
