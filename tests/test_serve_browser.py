"""The ``nmt serve`` page in a real Chromium, driven by Playwright for Python.

The browser is the system's ``chromium`` (Debian's package; .ci/run installs it when it
is missing): Playwright's own browser downloads (``playwright install``) cannot work on
these machines. Without a chromium binary, or without Playwright, every test here skips
and says why. A screenshot of the side-by-side view is kept in the test's temporary
folder (and copied to ``$NMT_SERVE_SCREENSHOT`` when that is set).
"""

from __future__ import annotations

import os
import shutil
import urllib.parse
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="nmt serve needs the serve extra: pip install -e '.[serve]'")
sync_api = pytest.importorskip(
    "playwright.sync_api", reason="Playwright for Python is missing (the dev extra)"
)

from serve_support import (  # noqa: E402
    REPO,
    build_app,
    diagonal_alignments,
    live_server,
    tiny_models,
)

pytestmark = pytest.mark.slow  # every test here trains or serves a model

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip(
        "no chromium binary: install the system's (apt-get install chromium; "
        ".ci/run does); `playwright install` is not used",
        allow_module_level=True,
    )

LONG = (
    "Ein Mann in einem blauen Hemd steht auf einer Leiter und putzt ein Fenster. "
    "Zwei Hunde spielen im Schnee."
)
SOURCE = "Eine Frau mit einem roten Hut liest ein Buch."


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
    pg = browser.new_page(viewport={"width": 1500, "height": 1100})
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.set_default_timeout(120_000)
    yield pg
    pg.close()
    assert not errors, errors


def open_page(page: Any, url: str, **state: Any) -> dict[str, Any]:
    """Open the page with ``state`` in its URL; returns the translate answer it used."""
    query = urllib.parse.urlencode(state)
    if "src" in state:
        with page.expect_response("**/api/translate") as resp:
            page.goto(f"{url}/?{query}")
        page.wait_for_selector("body[data-ready='1']")
        return resp.value.json()
    page.goto(f"{url}/?{query}")
    page.wait_for_selector("body[data-ready='1']")
    return {}


def squeeze(text: str) -> str:
    """Text with runs of white space as one space (as a browser shows it)."""
    return " ".join(text.split())


def best(answer: dict[str, Any], model: str) -> dict[str, Any]:
    result = next(r for r in answer["results"] if r["model"] == model)
    return result["lines"][0]["hypotheses"][0]


def test_translate_gives_two_columns(page: Any, url: str) -> None:
    open_page(page, url)
    assert page.locator("#model-boxes input:checked").evaluate_all(
        "xs => xs.map(x => x.value)"
    ) == ["additive", "none"]  # attention next to none
    page.fill("#src", SOURCE)
    page.fill("#beam", "2")
    page.fill("#nbest", "2")
    with page.expect_response("**/api/translate") as resp:
        page.click("#go")
    page.wait_for_selector(".pane")
    answer = resp.value.json()
    panes = page.locator(".pane")
    assert panes.count() == 2
    assert [panes.nth(i).get_attribute("data-model") for i in range(2)] == ["additive", "none"]
    for model in ("additive", "none"):
        pane = page.locator(f".pane[data-model={model}]")
        shown = pane.locator(".translation").inner_text()
        assert squeeze(shown) == squeeze(best(answer, model)["text"])
        # the pieces read as the detokenized text: no gap inside a word ("tak ing")
        assert pane.locator(".translation").text_content() == best(answer, model)["text"]
        pads = pane.locator(".translation .tgt-word").evaluate_all(
            "xs => xs.map(x => getComputedStyle(x).paddingLeft + getComputedStyle(x).paddingRight)"
        )
        assert pads and set(pads) == {"0px0px"}
        assert pane.locator(".hyp").count() == 2
        assert "score" in pane.locator(".stats").inner_text()
    assert "src=" in page.url and "models=additive%2Cnone" in page.url


def test_hover_lights_the_argmax_source_word_in_every_pane(
    page: Any, url: str, tmp_path: Path
) -> None:
    answer = open_page(
        page,
        url,
        src=SOURCE,
        ref="A woman in a red hat reads a book.",
        models="additive,multihead,none",
        beam=3,
        nbest=2,
    )
    k = 1
    page.hover(f".pane[data-model=additive] .tgt-word[data-t='{k}']")
    for model in ("additive", "multihead"):
        pane = page.locator(f".pane[data-model={model}]")
        want = best(answer, model)["alignment"][k]
        assert pane.locator(".src-word.argmax").get_attribute("data-s") == str(want)
        assert pane.locator(".hl-row").get_attribute("visibility") == "visible"
        assert pane.locator(".tgt-word.hl").get_attribute("data-t") == str(k)
    fixed = page.locator(".pane[data-model=none] .fixed-panel")
    assert fixed.locator(".tlabel.hl").get_attribute("data-t") == str(k)
    assert fixed.locator(".vector.hl").count() == 1
    shot = tmp_path / "serve_side_by_side.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000
    if os.environ.get("NMT_SERVE_SCREENSHOT"):
        shutil.copy(shot, os.environ["NMT_SERVE_SCREENSHOT"])
    # a source word: its column in every attention pane, its wire in the fixed one
    page.hover(".pane[data-model=none] .fixed-panel .slabel[data-s='0']")
    for model in ("additive", "multihead"):
        pane = page.locator(f".pane[data-model={model}]")
        assert pane.locator(".hl-col").get_attribute("visibility") == "visible"
        assert pane.locator(".heatmap .slabel.hl").get_attribute("data-s") == "0"
    assert fixed.locator(".wire.hl[data-s='0']").count() == 1
    # multihead: each head can be shown
    page.click(".pane[data-model=multihead] .heads button:has-text('head 2')")
    assert "head=multihead%3A2" in page.url


def test_none_pane_shows_the_single_vector(page: Any, url: str) -> None:
    open_page(page, url, src=SOURCE, models="additive,none", beam=1, nbest=1)
    pane = page.locator(".pane[data-model=none]")
    assert "fixed vector" in pane.locator(".badge").inner_text()
    assert pane.locator(".fixed-panel").is_visible() and pane.locator(".heatmap").count() == 0
    assert "same c" in pane.locator(".fixed-note").inner_text()
    assert pane.locator(".fixed-panel .wire").count() > 2
    page.hover(".pane[data-model=none] .tgt-word[data-t='0']")
    assert pane.locator(".fixed-panel .tlabel.hl").get_attribute("data-t") == "0"


def test_study_plot_has_one_line_per_model(page: Any, url: str) -> None:
    open_page(
        page,
        url,
        tab="study",
        study="deen_long_study",
        sset="test_2016_flickr_joined",
        src=LONG,
        models="additive,none",
        beam=1,
        nbest=1,
    )
    page.wait_for_selector(".study-line")
    study = page.request.get(f"{url}/api/studies/deen_long_study").json()
    ts = next(t for t in study["test_sets"] if t["name"] == "test_2016_flickr_joined")
    lines = page.locator(".study-line")
    assert lines.count() == len(ts["systems"]) == 9
    shown = lines.evaluate_all("xs => xs.map(x => x.dataset.system)")
    assert sorted(shown) == sorted(ts["systems"])
    assert page.locator(".band").count() == 9
    assert page.locator("#study-plot .count").count() == len(ts["buckets"])
    assert "your input: 19 words" in page.locator(".input-label").text_content()
    page.click(".bucket-hit[data-bucket='11-20']")
    page.wait_for_selector(".bucket-row")
    assert page.locator(".bucket-row").count() == 5
    assert page.locator(".bucket-row").first.locator(".output").count() == 2
    assert "sbucket=11-20" in page.url
    # choosing the study's test set writes it to the URL at once, not at a bucket's click
    page.select_option("#study-set", "test_2016_flickr")
    page.wait_for_function(
        "() => location.search.includes('sset=test_2016_flickr&') || "
        "location.search.endsWith('sset=test_2016_flickr')"
    )
    query = urllib.parse.parse_qs(urllib.parse.urlsplit(page.url).query)
    assert query["sset"] == ["test_2016_flickr"] and "sbucket" not in query


def test_forced_prefix_changes_the_output_and_the_url_keeps_it(
    page: Any, browser: Any, url: str
) -> None:
    answer = open_page(page, url, src=SOURCE, models="additive,none", beam=3, nbest=3)
    hyps = next(r for r in answer["results"] if r["model"] == "additive")["lines"][0]["hypotheses"]
    first, other = hyps[0]["tgt_pieces"], hyps[1]["tgt_pieces"]
    k = next(i for i, (a, b) in enumerate(zip(first + [""], other, strict=False)) if a != b)
    with page.expect_response("**/api/translate") as resp:
        page.click(f".pane[data-model=additive] .hyp[data-i='1'] .tok[data-k='{k}']")
    page.wait_for_function("() => !document.getElementById('prefix-bar').hidden")
    forced = resp.value.json()
    prefix = forced["prefix"]
    assert prefix and page.locator("#prefix").inner_text() == prefix
    new = best(forced, "additive")
    assert new["text"] != hyps[0]["text"] and new["text"].startswith(prefix)
    pane = page.locator(".pane[data-model=additive]")
    assert squeeze(pane.locator(".translation").inner_text()) == squeeze(new["text"])
    assert pane.locator(".hyp[data-i='0'] .tok.forced").count() == new["forced"] > 0
    assert "prefix=" in page.url
    again = browser.new_page(viewport={"width": 1500, "height": 1100})
    try:
        again.set_default_timeout(120_000)
        with again.expect_response("**/api/translate"):
            again.goto(page.url)
        again.wait_for_selector("body[data-ready='1']")
        shown = again.locator(".pane[data-model=additive] .translation").inner_text()
        assert squeeze(shown) == squeeze(new["text"])
        assert again.locator("#prefix").inner_text() == prefix
    finally:
        again.close()


def test_examples_picker_and_offline_docs(page: Any, url: str) -> None:
    open_page(page, url)
    page.select_option("#set", "test_2016_flickr_joined")
    page.select_option("#bucket", "31-40")
    page.wait_for_selector("#examples[data-bucket='31-40'] li[data-id]")
    item = page.locator("#examples li[data-id]").first
    words = int(item.inner_text().split("(")[1].split(")")[0])
    assert 31 <= words <= 40
    with page.expect_response("**/api/translate"):
        item.click()
    page.wait_for_selector(".pane")
    assert page.locator("#ref").input_value()  # the example's reference came along
    assert page.locator(".pane .bleu").count() == 2
    # an error loading examples is a note beside the list, not a numbered sentence
    page.route(
        "**/api/examples?*",
        lambda route: route.fulfill(
            status=404,
            content_type="application/json",
            body='{"error": "unknown_test_set", "message": "no test_set here"}',
        ),
    )
    page.select_option("#set", "test_2016_flickr")
    page.wait_for_function("() => document.getElementById('examples-note').textContent")
    assert page.locator("#examples li").count() == 0
    assert "no test_set here" in page.locator("#examples-note").inner_text()
    page.unroute("**/api/examples?*")
    page.goto(f"{url}/docs")
    page.wait_for_selector("[data-path='/api/translate']")  # Swagger UI drew the operation


@pytest.fixture(scope="module")
def aligned_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    models = tiny_models(tmp_path_factory)
    folder = diagonal_alignments(tmp_path_factory.mktemp("alignments"))
    with live_server(build_app(models, alignments=folder)) as base:
        yield base


def test_reference_alignment_outlined_with_each_heads_agreement(
    page: Any, aligned_url: str
) -> None:
    open_page(page, aligned_url, set="test_2016_flickr", models="additive,multihead,none")
    item = page.locator("#examples li[data-id='2']")
    with page.expect_response("**/api/reference_alignment") as resp:
        item.click()
    answer = resp.value.json()["alignment"]
    assert answer is not None and answer["set"] == "test_2016_flickr" and answer["line"] == 2
    page.wait_for_selector(".pane[data-model=multihead] button.view")
    note = page.locator("#reference-note").inner_text()
    assert "test_2016_flickr line 3" in note and "not gold" in note
    assert page.locator(".pane[data-model=none] button.view").count() == 0  # no attention
    assert page.locator(".ref-link").count() == 0  # the hypothesis view stays the default
    page.click(".pane[data-model=multihead] button[data-view=ref]")
    pane = page.locator(".pane[data-model=multihead]")
    pane.locator(".ref-link").first.wait_for()
    assert "view=ref" in page.url
    # every reference link is outlined: the hand-made alignment is the diagonal
    assert pane.locator(".ref-link").count() == len(answer["links"])
    assert pane.locator(".own-link").count() > 0
    assert "not gold" in pane.locator(".reference-note").inner_text()
    view = next(m for m in answer["models"] if m["model"] == "multihead")
    rows = pane.locator("table.agreement tr.agree-row")
    assert rows.evaluate_all("rs => rs.map(r => r.dataset.head)") == ["1", "2", "mean"]
    for row, want in zip(rows.all(), view["agreement"], strict=True):
        assert row.locator("td.aer").inner_text() == f"{100 * want['aer']:.1f}%"
        assert row.locator("td.precision").inner_text() == f"{100 * want['precision']:.1f}%"
    assert pane.locator("tr.agree-row.shown").get_attribute("data-head") == "mean"
    rows.nth(1).click()  # head 2: its weights, its links, its row
    assert pane.locator("tr.agree-row.shown").get_attribute("data-head") == "2"
    assert pane.locator(".heads button.active").inner_text() == "head 2"
    dots = pane.locator(".own-link").evaluate_all(
        "cs => cs.map(c => [Number(c.dataset.i), Number(c.dataset.j)])"
    )
    assert sorted(dots) == view["agreement"][1]["links"]
    page.click(".pane[data-model=multihead] button[data-view=hyp]")
    assert page.locator(".ref-link").count() == 0
