"""The ``nmt serve`` page's exports and long input, in the system's Chromium (Playwright;
the fixtures and the skips of tests/test_serve_browser.py): each heatmap and the
fixed-vector panel download as PNG, SVG and JSON holding the shown sentence; the study
plot as PNG, SVG and CSV; the standalone HTML of the view opens offline; and a 60-word
sentence keeps readable labels in both panels (screenshot copied to
``$NMT_SERVE_SCREENSHOT_DIR`` when set, e.g. results/serve/), with the example list's
4-digit line numbers shown whole."""

from __future__ import annotations

import csv
import io
import json
import os
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from serve_support import REPO, build_app, live_server, tiny_models
from test_serve_browser import CHROMIUM, open_page, sync_api

pytestmark = pytest.mark.slow  # every test here trains or serves a model

SOURCE = "Eine Frau mit einem roten Hut liest ein Buch."
# 60 words: four Multi30k-like sentences joined, as the joined test sets are
LONG60 = (
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt das große Fenster "
    "eines alten Hauses. Zwei Hunde spielen im Schnee vor dem Haus und "
    "jagen einen roten Ball. Eine Frau mit einem grünen Hut sitzt auf einer Bank im Park "
    "und liest ein dickes Buch. Drei Kinder laufen lachend über die Wiese zu ihrer "
    "Mutter, die wartet."
)


@pytest.fixture(scope="module")
def url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    models = tiny_models(tmp_path_factory)
    with live_server(build_app(models, [REPO / "reports" / "deen_long_study"])) as base:
        yield base


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_api.sync_playwright() as p:
        args = ["--no-sandbox"] if os.geteuid() == 0 else []
        try:
            b = p.chromium.launch(executable_path=CHROMIUM, args=args)
        except Exception as e:  # a chromium that cannot start: say so, do not fail
            pytest.skip(f"chromium at {CHROMIUM} does not start: {e}")
        yield b
        b.close()


@pytest.fixture
def page(browser: Any) -> Iterator[Any]:
    ctx = browser.new_context(viewport={"width": 1500, "height": 1100}, accept_downloads=True)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(120_000)
    yield pg
    ctx.close()
    assert not errors, errors


def download(page: Any, selector: str, folder: Path) -> Path:
    with page.expect_download() as d:
        page.click(selector)
    path = folder / d.value.suggested_filename
    d.value.save_as(str(path))
    return path


def test_words_of_the_long_sentence() -> None:
    assert len(LONG60.split()) == 60


def test_each_pane_exports_png_svg_and_json(page: Any, url: str, tmp_path: Path) -> None:
    answer = open_page(page, url, src=SOURCE, models="additive,none", beam=2, nbest=1)
    for model, kind in (("additive", "attention"), ("none", "fixed_vector")):
        bar = f".pane[data-model={model}] .export-bar"
        png = download(page, f"{bar} button[data-format=png]", tmp_path)
        svg = download(page, f"{bar} button[data-format=svg]", tmp_path)
        data = download(page, f"{bar} button[data-format=json]", tmp_path)
        assert png.name == f"{model}_{kind}.png" and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert png.stat().st_size > 1000
        root = ET.fromstring(svg.read_bytes())  # a well-formed standalone SVG
        assert root.tag == "{http://www.w3.org/2000/svg}svg"
        labels = [t.text for t in root.iter("{http://www.w3.org/2000/svg}text")]
        line = next(r for r in answer["results"] if r["model"] == model)["lines"][0]
        shown = [p.lstrip("\u2581") for p in line["src_pieces"]]
        assert [x for x in labels if x in shown], labels  # the sentence's pieces are drawn
        got = json.loads(data.read_text(encoding="utf-8"))
        assert got["source"] == SOURCE and got["model"] == model
        best = line["hypotheses"][0]
        assert got["tgt_pieces"] == best["tgt_pieces"] and got["text"] == best["text"]
        assert got["token_logprobs"] == best["token_logprobs"]
        if model == "none":
            assert got["weights"] is None and "one vector" in labels
        else:
            assert got["weights"] == best["attention"]
            assert len(got["weights"][0]) == len(line["src_pieces"])


def test_study_plot_exports_png_svg_and_csv(page: Any, url: str, tmp_path: Path) -> None:
    open_page(page, url, tab="study", study="deen_long_study", sset="test_2016_flickr")
    page.wait_for_selector(".study-line")
    png = download(page, "#study-plot button[data-format=png]", tmp_path)
    svg = download(page, "#study-plot button[data-format=svg]", tmp_path)
    table = download(page, "#study-plot button[data-format=csv]", tmp_path)
    assert png.read_bytes()[:4] == b"\x89PNG"
    assert "BLEU" in svg.read_text(encoding="utf-8")
    rows = list(csv.DictReader(io.StringIO(table.read_text(encoding="utf-8"))))
    study = page.request.get(f"{url}/api/studies/deen_long_study").json()
    ts = next(t for t in study["test_sets"] if t["name"] == "test_2016_flickr")
    # a bucket the study found empty has no BLEU nor chrF: its cells are empty
    want = [
        (
            b["label"],
            s,
            (b["rows"][s]["bleu"] or {}).get("score"),
            (b["rows"][s]["chrf"] or {}).get("score"),
        )
        for b in ts["buckets"]
        for s in ts["systems"]
        if s in b["rows"]
    ]
    assert any(w[2] is not None for w in want)
    assert [
        (
            r["bucket"],
            r["system"],
            float(r["bleu"]) if r["bleu"] else None,
            float(r["chrf"]) if r["chrf"] else None,
        )
        for r in rows
    ] == want


def test_standalone_html_opens_offline(page: Any, browser: Any, url: str, tmp_path: Path) -> None:
    answer = open_page(page, url, src=SOURCE, models="additive,none", beam=2, nbest=1)
    html = download(page, "#save-html", tmp_path)
    text = html.read_text(encoding="utf-8")
    assert SOURCE in text and "/static/" not in text  # nothing to load from the server
    ctx = browser.new_context(offline=True)
    try:
        off = ctx.new_page()
        asked: list[str] = []
        off.on("request", lambda r: asked.append(r.url))
        off.goto(html.as_uri())
        assert asked == [html.as_uri()]  # the file alone
        assert off.locator(".pane").count() == 2
        for r in answer["results"]:
            shown = off.locator(f".pane[data-model={r['model']}] .translation").text_content()
            assert shown == r["lines"][0]["text"]
        assert off.locator(".heatmap svg rect").count() > 0
        data = json.loads(off.locator("#nmt-data").text_content())
        assert data["results"][0]["lines"][0]["source"] == SOURCE
    finally:
        ctx.close()


def test_a_60_word_sentence_is_readable_in_both_panels(page: Any, url: str, tmp_path: Path) -> None:
    answer = open_page(page, url, src=LONG60, models="additive,none", beam=1, nbest=1)
    S = len(answer["results"][0]["lines"][0]["src_pieces"])
    assert S > 60
    heat = page.locator(".pane[data-model=additive] .heatmap")
    xs = heat.locator(".slabel").evaluate_all("xs => xs.map(x => Number(x.getAttribute('x')))")
    assert len(xs) == S and min(b - a for a, b in zip(xs, xs[1:], strict=False)) >= 13
    # the heatmap keeps its cells and scrolls instead of shrinking them
    assert heat.evaluate("n => n.scrollWidth > n.clientWidth || n.scrollHeight > n.clientHeight")
    panel = page.locator(".pane[data-model=none] .fixed-panel svg")
    assert float(panel.get_attribute("height")) <= 340  # compact: 20 rows at most
    ys = panel.locator(".slabel").evaluate_all(
        "xs => xs.map(x => [Number(x.getAttribute('x')), Number(x.getAttribute('y'))])"
    )
    spots = {(round(x), round(y)) for x, y in ys}
    assert len(spots) == len(ys)  # no two labels on one spot
    by_col: dict[int, list[float]] = {}
    for x, y in ys:
        by_col.setdefault(round(x), []).append(y)
    assert all(
        min(b - a for a, b in zip(sorted(c), sorted(c)[1:], strict=False)) >= 14
        for c in by_col.values()
        if len(c) > 1
    )
    shot = tmp_path / "serve_long_60_words.png"
    page.screenshot(path=str(shot), full_page=True)
    if os.environ.get("NMT_SERVE_SCREENSHOT_DIR"):
        shutil.copy(shot, Path(os.environ["NMT_SERVE_SCREENSHOT_DIR"]) / shot.name)
    # the example list shows 4-digit line numbers whole
    split = "test_2016_flickr_joined"
    for asked in ("61-", "51-60", "41-50", "31-40"):  # "61-": "61+" unencoded in a URL
        got = page.request.get(f"{url}/api/examples?split={split}&bucket={asked}&limit=10").json()
        ex, bucket = got["examples"], got["bucket"]  # the label the page's options use
        if any(e["id"] >= 999 for e in ex):
            break
    else:
        pytest.skip("no example with a 4-digit line number among the joined set's first ten")
    page.select_option("#set", split)
    page.select_option("#bucket", bucket)
    page.wait_for_selector(f"#examples[data-bucket='{bucket}'] li[data-id]")
    nums = page.locator("#examples .num")
    want = [f"{e['id'] + 1}." for e in ex]
    assert nums.evaluate_all("xs => xs.map(x => x.textContent)") == want
    inside = nums.evaluate_all(
        "xs => xs.map(x => { const r = x.getBoundingClientRect(), "
        "l = x.closest('ol').getBoundingClientRect(); "
        "return r.left >= l.left && r.width > 0; })"
    )
    assert all(inside)
