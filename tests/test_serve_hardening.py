"""``nmt serve`` against a hostile client and a careless command line: bodies counted as
they arrive, strict JSON types, non-finite numbers, text that is not UTF-8, empty lines,
budgets of work and answer size, a client that goes away, the OpenAPI codes per route,
test BLEU matched to its checkpoint by sha256, and start-up errors that come before the
models are loaded. The tiny models are serve_support's, trained once per session."""

from __future__ import annotations

import hashlib
import json
import shutil
import socket
import subprocess
import sys
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")
pytest.importorskip("httpx", reason="FastAPI's TestClient needs httpx (the dev extra)")

from fastapi.testclient import TestClient
from serve_support import (
    LINES,
    REPO,
    build_app,
    live_server,
    synthetic_study,
    tiny_models,
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return tiny_models(tmp_path_factory)


@pytest.fixture(scope="module")
def app(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Any:
    return build_app(models, [synthetic_study(tmp_path_factory.mktemp("study") / "synthetic")])


@pytest.fixture(scope="module")
def client(app: Any) -> Iterator[TestClient]:
    with TestClient(app) as c:
        yield c


def raw(client: TestClient, text: str) -> Any:
    """POST /api/translate with ``text`` as the body, as written (NaN, lone surrogates)."""
    return client.post(
        "/api/translate", content=text.encode("utf-8"), headers={"content-type": "application/json"}
    )


def invalid(r: Any, where: str) -> dict[str, Any]:
    assert r.status_code == 422, r.text
    body = r.json()
    assert body["error"] == "invalid_request" and where in body["message"], body
    return body


# 1. the body limit counts bytes as they arrive; a 422 does not echo a large input


@pytest.mark.slow
def test_chunked_body_over_the_limit_is_refused_as_it_arrives(app: Any) -> None:
    with live_server(app) as url:
        host, port = urllib.parse.urlsplit(url).hostname, urllib.parse.urlsplit(url).port
        assert port is not None, url
        with socket.create_connection((host, port), timeout=120) as s:
            s.sendall(
                b"POST /api/translate HTTP/1.1\r\nHost: test\r\n"
                b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
            )
            first = b'{"lines": ["'
            s.sendall(b"%x\r\n%s\r\n" % (len(first), first))
            chunk = b"x" * (1 << 16)
            for _ in range(17):  # just past 1 MiB, and then no more: the end never comes
                s.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            answer = b""
            while b"\r\n\r\n" not in answer or not answer.rstrip().endswith(b"}"):
                data = s.recv(65536)  # the old middleware waited here for the rest
                if not data:
                    break
                answer += data
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 413"), head
    e = json.loads(body)
    assert e["limit"] == "max_body_bytes" and e["field"] == "body" and e["value"] > 1 << 20


@pytest.mark.slow
def test_invalid_body_does_not_echo_a_large_input(client: TestClient) -> None:
    r = client.post("/api/translate", json={"lines": "x" * 900_000})
    body = invalid(r, "lines")
    assert len(r.content) < 5_000
    (err,) = body["errors"]
    assert err["loc"] == ["body", "lines"] and err["msg"] and err["type"] == "list_type"
    assert err["input"] is None
    short = client.post("/api/translate", json={"lines": ["x"], "beam": "5"}).json()
    assert short["errors"][0]["input"] == "5"  # a short value is still shown


# 2, 3, 7, 9: strict types, finite numbers, UTF-8 text, no empty line


@pytest.mark.slow
@pytest.mark.parametrize("value", ["NaN", "Infinity", "-Infinity"])
def test_non_finite_alpha_is_422(client: TestClient, value: str) -> None:
    body = invalid(raw(client, f'{{"lines": ["Ein Hund."], "alpha": {value}}}'), "alpha")
    assert body["errors"][0]["loc"] == ["body", "alpha"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "text, where, line",
    [
        ('{"lines": ["Ein Hund.", "Ein Hund \\ud800 l\\u00e4uft."]}', "line 1 of lines", 1),
        ('{"lines": ["Ein Hund."], "prefix": "A \\udfff"}', "prefix", None),
        ('{"lines": ["Ein Hund."], "references": ["A \\ud800 dog."]}', "line 0 of references", 0),
        ('{"lines": ["Ein Hund."], "models": ["\\ud800"]}', "models.0", None),
    ],
)
def test_lone_surrogates_are_422_naming_the_field(
    client: TestClient, text: str, where: str, line: int | None
) -> None:
    body = invalid(raw(client, text), where)
    assert "surrogate" in body["message"] and body.get("line") == line


@pytest.mark.slow
@pytest.mark.parametrize(
    "body", [b'{"lines": ["Ein Hund \xff l\xc3"]}', b'{"lines": ["\xc3\x28"]}']
)
def test_a_body_that_is_not_utf8_is_422_as_documented(client: TestClient, body: bytes) -> None:
    """Invalid UTF-8 bytes in the body were 400 (FastAPI's "error parsing the body");
    docs/serve.md lists text that is not UTF-8 under 422."""
    r = client.post("/api/translate", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json()["error"] == "invalid_request" and "not UTF-8" in r.json()["message"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "field, value",
    [
        ("beam", "5"),
        ("beam", True),
        ("beam", 2.0),
        ("n_best", "1"),
        ("top_k", "2"),
        ("top_k", False),
        ("alpha", "0.5"),
        ("alpha", True),
        ("truncate", "yes"),
        ("truncate", "on"),
        ("truncate", 1),
        ("lines", [1]),
        ("models", [1]),
    ],
)
def test_wrong_json_types_are_422_not_coerced(client: TestClient, field: str, value: Any) -> None:
    body = {"lines": ["Ein Hund."], "models": ["none"], field: value}
    invalid(client.post("/api/translate", json=body), field)


@pytest.mark.slow
def test_an_int_is_a_float(client: TestClient) -> None:
    r = client.post(
        "/api/translate", json={"lines": ["Ein Hund."], "models": ["none"], "beam": 2, "alpha": 1}
    )
    assert r.status_code == 200, r.text


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, where, line",
    [
        ({"lines": ["Ein Hund.", ""]}, "line 1 of lines is empty", 1),
        ({"lines": [" \t "]}, "line 0 of lines is empty", 0),
        ({"lines": ["Ein Hund."], "references": [""]}, "line 0 of references is empty", 0),
    ],
)
def test_empty_lines_and_references_are_422(
    client: TestClient, body: dict[str, Any], where: str, line: int
) -> None:
    e = invalid(client.post("/api/translate", json=body), where)
    assert e["line"] == line


@pytest.mark.slow
def test_every_line_answered_has_its_end_piece(client: TestClient) -> None:
    r = client.post("/api/translate", json={"lines": ["\U0001f415"], "models": ["none"], "beam": 1})
    assert r.status_code == 200, r.text
    line = r.json()["results"][0]["lines"][0]
    assert line["unknown"] and line["src_pieces"][-1] == "</s>" and line["hypotheses"]


# 10. budgets of work and answer size; a client that went away


@pytest.mark.slow
def test_search_work_and_answer_size_are_capped(client: TestClient) -> None:
    limits = client.get("/api/models").json()["limits"]
    assert limits["max_search_work"] == 64_000 and limits["max_answer_numbers"] == 5_000_000
    r = client.post(
        "/api/translate",
        json={"lines": ["a " * 999] * 32, "beam": 16, "truncate": True, "models": ["none"]},
    )
    assert r.status_code == 413, r.text
    e = r.json()
    assert e["limit"] == "max_search_work" and e["value"] > e["max"] == 64_000
    assert e["field"] == "request" and "max_search_work" in e["message"]
    r = client.post(
        "/api/translate",
        json={
            "lines": ["a " * 100] * 8,
            "beam": 16,
            "n_best": 16,
            "top_k": 10,
            "models": ["multihead"],
        },
    )
    assert r.status_code == 413, r.text
    assert r.json()["limit"] == "max_answer_numbers" and r.json()["value"] > 5_000_000


@pytest.mark.slow
def test_a_client_that_went_away_frees_its_queue_places(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    import starlette.requests

    import nmt.serve.batcher as serve_batcher

    client = TestClient(build_app(models, queue=1, ids=["none"]))
    searched: list[Any] = []
    monkeypatch.setattr(serve_batcher, "run_jobs", lambda *a, **k: searched.append(a))

    async def gone(self: Any) -> bool:
        return True

    monkeypatch.setattr(starlette.requests.Request, "is_disconnected", gone)
    r = client.post("/api/translate", json={"lines": LINES, "beam": 1})
    assert r.status_code == 499 and r.json()["error"] == "client_disconnected"
    assert searched == []
    monkeypatch.undo()
    # the one place of the queue came back: a leaked one would answer 429
    assert client.post("/api/translate", json={"lines": [LINES[0]], "beam": 1}).status_code == 200


# 8. buckets


@pytest.mark.slow
def test_bucket_plus_unencoded_and_lists(client: TestClient) -> None:
    open_end = client.get("/api/examples?split=test_2016_flickr&bucket=21+")  # "+" is " "
    assert open_end.status_code == 200, open_end.text
    assert open_end.json()["bucket"] == "21+"
    encoded = client.get("/api/examples?split=test_2016_flickr&bucket=21%2B").json()
    assert encoded["total"] == open_end.json()["total"]
    r = client.get("/api/examples?split=test_2016_flickr&bucket=1-10,11-20")
    assert r.status_code == 400 and r.json()["option"] == "bucket"
    assert "a list of ranges" in r.json()["message"] and "unpack" not in r.json()["message"]
    bad = client.get("/api/examples?split=test_2016_flickr&bucket=61").json()["message"]
    assert "%2B" in bad and "1-10,11-20" not in bad


# 11, 12: OpenAPI codes per route, no /redoc from a CDN, study directions


@pytest.mark.slow
def test_openapi_lists_only_the_codes_each_route_gives(client: TestClient) -> None:
    paths = client.get("/openapi.json").json()["paths"]
    codes = {
        p: set(paths[p]["get" if p != "/api/translate" else "post"]["responses"])
        for p in ("/api/studies/{name}", "/api/examples", "/api/translate")
    }
    assert codes == {
        "/api/studies/{name}": {"200", "404"},
        "/api/examples": {"200", "400", "404", "422"},
        "/api/translate": {"200", "400", "404", "413", "422", "429", "503"},
    }
    assert client.get("/redoc").status_code == 404


@pytest.mark.slow
def test_without_fastapi_offline_there_is_no_cdn_redoc(
    models: dict[str, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "fastapi_offline", None)  # import fails: plain FastAPI
    c = TestClient(build_app(models, ids=["none"]))
    assert c.get("/redoc").status_code == 404


@pytest.mark.slow
def test_a_study_of_another_direction_is_warned_and_listed(
    models: dict[str, Path], tmp_path: Path
) -> None:
    from nmt.serve.server import ServeOptions, build

    folder = synthetic_study(tmp_path / "enfr")
    results = json.loads((folder / "results.json").read_text())
    enfr = REPO / "configs/multi30k_enfr_additive.yaml"
    results["study"].update(name="enfr", base_config=str(enfr), overrides=["train.threads=1"])
    (folder / "results.json").write_text(json.dumps(results))
    logs: list[str] = []
    app = build(
        ServeOptions(models=[f"none={models['none']}"], studies=[folder], threads=1, device="cpu"),
        log=logs.append,
    )
    warned = [m for m in logs if m.startswith("warning: study")]
    assert len(warned) == 1 and "en->fr" in warned[0] and "de->en" in warned[0]
    c = TestClient(app)
    assert c.get("/api/studies").json()["studies"][0]["direction"] == "en->fr"
    assert c.get("/api/studies/enfr").json()["direction"] == "en->fr"


# 4. test BLEU matched by sha256, its decoding from `search`


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.slow
def test_test_bleu_is_matched_by_sha256(models: dict[str, Path], tmp_path: Path) -> None:
    import torch

    from nmt.serve.registry import load_entry

    cpu = torch.device("cpu")
    ck = tmp_path / "best.pt"
    shutil.copy(models["none"], ck)
    (tmp_path / "select.json").write_text(
        json.dumps(
            {
                "chosen_checkpoint": str(ck),
                "chosen_checkpoint_sha256": sha(ck),
                "beam": 5,
                "alpha": 1.0,
                "test": {
                    "test_2016_flickr": {
                        "beam_bleu": 12.5,
                        "signature": "nrefs:1",
                        "search": "beam search, beam 5",
                    }
                },
            }
        )
    )
    tb = load_entry("n", ck, cpu, 1).info["test_bleu"]
    assert tb["bleu"] == 12.5 and tb["status"] == "verified"
    assert tb["decoding"] == "beam search, beam 5"
    shutil.copy(models["additive"], ck)  # best.pt replaced: the stored score is another's
    info = load_entry("n", ck, cpu, 1).info
    assert info["test_bleu"] is None and info["test_bleu_stale"]["file"] == "select.json"
    assert "another sha256" in info["test_bleu_stale"]["reason"]
    (tmp_path / "select.json").unlink()
    (tmp_path / "eval.json").write_text(
        json.dumps(
            [
                {  # written before nmt kept the hash
                    "checkpoint": str(ck),
                    "test_set": "test_2017_flickr",
                    "bleu": 9.0,
                    "signature": "s",
                    "search": "greedy search",
                }
            ]
        )
    )
    tb = load_entry("n", ck, cpu, 1).info["test_bleu"]
    assert tb["status"] == "unverified" and tb["decoding"] == "greedy search"


@pytest.mark.slow
def test_evaluate_and_select_json_record_the_checkpoint_sha256(
    models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import nmt.analysis.selection as selection
    import nmt.commands.select as select_mod
    from nmt.commands.evaluate import evaluate_checkpoints

    src, ref = tmp_path / "src.de", tmp_path / "ref.en"
    src.write_text("Ein Hund.\n")
    ref.write_text("A dog.\n")
    (record,) = evaluate_checkpoints(
        [models["none"]], src=src, ref=ref, beam_size=1, device="cpu"
    ).json
    assert record["checkpoint_sha256"] == sha(models["none"]) and record["search"]
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(models["none"], run / "best.pt")

    def fake(ckpts: list[Path], **kw: Any) -> Any:
        return [
            type(
                "S",
                (),
                {
                    "record": {
                        "checkpoint": str(p),
                        "checkpoint_sha256": sha(p),
                        "bleu": 1.0,
                        "chrf": 2.0,
                        "signature": "s",
                        "chrf_signature": "c",
                        "bleu_papers": 3.0,
                        "papers_signature": "p",
                        "search": f"beam {kw['beam_size']}",
                    }
                },
            )()
            for p in ckpts
        ]

    monkeypatch.setattr(selection, "score_checkpoints", fake)
    summary = select_mod.select(
        run,
        selection.SelectOptions(
            alphas=(1.0,), average=0, test_splits=("test_2016_flickr",), device="cpu"
        ),
        log=lambda m: None,
    )
    assert summary["chosen_checkpoint_sha256"] == sha(run / "best.pt")
    assert summary["test"]["test_2016_flickr"]["search"] == "beam 5"


# 5. start-up errors before the models load, one line, exit 2


@pytest.fixture
def no_loading(monkeypatch: pytest.MonkeyPatch) -> None:
    import nmt.serve.server as server

    def refuse(*a: Any, **k: Any) -> Any:
        raise AssertionError("models were loaded before the error")

    monkeypatch.setattr(server, "load_registry", refuse)


@pytest.mark.slow
def test_bad_host_and_busy_port_fail_before_loading(
    models: dict[str, Path], no_loading: None
) -> None:
    from nmt.serve.server import ServeOptions, serve

    spec = [f"x={models['none']}"]
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(ValueError, match=f"--port {port}: .* is in use"):
            serve(ServeOptions(models=spec, port=port), log=lambda m: None)
    with pytest.raises(ValueError, match="--host 'no-such-host.invalid'"):
        serve(ServeOptions(models=spec, host="no-such-host.invalid"), log=lambda m: None)
    with pytest.raises(ValueError, match="--host '203.0.113.7': not an address of this"):
        serve(ServeOptions(models=spec, host="203.0.113.7"), log=lambda m: None)


@pytest.mark.slow
def test_bad_models_and_studies_fail_before_loading(
    models: dict[str, Path], tmp_path: Path, no_loading: None
) -> None:
    from nmt.serve.server import ServeOptions, serve
    from nmt.serve.studies import StudyError

    def start(models: list[str], studies: list[Path] | None = None) -> None:
        serve(ServeOptions(models=models, studies=studies or [], port=1), log=lambda m: None)

    ck = models["none"]
    with pytest.raises(ValueError, match="--model 'a=': empty path"):
        start(["a="])
    with pytest.raises(ValueError, match="the id 'x' is given twice") as e:
        start([f"x={ck}", f"x={models['additive']}"])
    assert "ID=PATH" not in str(e.value)
    with pytest.raises(StudyError, match="--study .*missing"):
        start([f"x={ck}"], [tmp_path / "missing"])
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "results.json").write_text("{}")
    with pytest.raises(StudyError, match="not a study report"):
        start([f"x={ck}"], [tmp_path / "empty"])
    study = synthetic_study(tmp_path / "s")
    with pytest.raises(StudyError, match="given twice"):
        start([f"x={ck}"], [study, study])


@pytest.mark.slow
def test_busy_port_on_the_command_line_is_one_error_line(models: dict[str, Path]) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "nmt",
                "serve",
                "--model",
                f"x={models['none']}",
                "--port",
                str(port),
            ],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=600,
        )
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --port"), r.stderr
    assert "serving on" not in r.stderr + r.stdout


# 14. the usage guide leads to nmt serve


def test_usage_guide_covers_serve() -> None:
    text = (REPO / "docs/usage.md").read_text(encoding="utf-8")
    assert "nmt serve" in text and "serve.md" in text


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, content_type, where",
    [
        (b'{"lines": ["Ein Hund."]', "application/json", "character 23"),
        (b"Ein Hund.", "application/json", "character 0"),
        (b"Ein Hund.", "text/plain", None),
    ],
)
def test_a_body_that_is_not_json_says_what_to_send(
    client: TestClient, body: bytes, content_type: str, where: str | None
) -> None:
    """A body that is not a JSON object was answered with pydantic's bare "JSON decode
    error" (or "Input should be a valid dictionary"); the message now names the fault, where
    it is, and the shape of a valid request."""
    r = client.post("/api/translate", content=body, headers={"content-type": content_type})
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert "JSON" in message and '{"lines": [' in message, message
    if where is not None:
        assert where in message, message
    if content_type != "application/json":  # the header is the fault, not the body
        assert "Content-Type is 'text/plain'" in message, message


@pytest.mark.slow
def test_a_non_json_body_to_reference_alignment_shows_that_routes_shape(client: TestClient) -> None:
    """The example in the message is the route's own: reference_alignment takes ``line``."""
    r = client.post(
        "/api/reference_alignment",
        content=b"Ein Hund.",
        headers={"content-type": "application/json"},
    )
    assert r.status_code == 422, r.text
    message = r.json()["message"]
    assert '{"line": "' in message and '"lines"' not in message, message
