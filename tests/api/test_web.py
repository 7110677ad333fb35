"""The search & debug page in headless Chromium (Debian's /usr/bin/chromium, driven by
playwright), against a real server with auth on: key, search, badges, ranks, and the
keyboard path to a hit's journey. Screenshots go to test-artifacts/ (gitignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("playwright", reason="needs playwright (the test extra)")

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed: apt-get install -y chromium", allow_module_level=True)

from http_served import Served, documents, serve_engine  # noqa: E402
from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

ARTIFACTS = Path(__file__).resolve().parents[2] / "test-artifacts"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    with serve_engine(tmp_path) as s:
        yield s


@pytest.fixture
def page(served: Served) -> Iterator[Page]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1100, "height": 900})
        pg = context.new_page()
        pg.set_default_timeout(15_000)
        errors: list[str] = []
        pg.on("pageerror", lambda exc: errors.append(str(exc)))
        yield pg
        browser.close()
        assert errors == [], f"JavaScript errors on the page: {errors}"


def _focus_first_hit(page: Page) -> None:
    for _ in range(12):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('hit')"):
            return
    pytest.fail("Tab never reached a hit")


def _enter_key(page: Page, token: str, collections: int, *, remember: bool = False) -> None:
    # An auth server asks for a key: a prompt, not an error (no request was refused).
    expect(page.locator("#key-prompt")).to_be_visible()
    expect(page.locator("#key-title")).to_have_text("This server asks for an API key")
    expect(page.locator("#status")).to_have_text("")
    page.locator("#api-key").fill(token)
    if remember:
        page.locator("#remember-key").check()
    page.locator("#api-key").press("Enter")
    expect(page.locator("#collection option")).to_have_count(collections)
    expect(page.locator("#key-prompt")).to_be_hidden()


def test_search_badges_ranks_and_the_debug_view_by_keyboard(served: Served, page: Page) -> None:
    page.goto(served.url + "/")
    _enter_key(page, served.tokens["reader_a"], 1)
    # The reader's key covers only 'a': 'b' is not offered.
    assert page.locator("#collection option").all_inner_texts() == ["a (5 chunks)"]

    page.locator("#query").fill("ERR-4012")
    page.locator("#query").press("Enter")
    hits = page.locator("#hits .hit")
    expect(hits).to_have_count(5)
    first = hits.nth(0)
    expect(first.locator(".badge")).to_have_text("both")
    expect(first.locator(".rank-lexical")).to_have_text("lexical #1")
    expect(first.locator(".origin")).to_have_text("kb-101.md")
    expect(first.locator(".snippet")).to_contain_text("ERR-4012: checkout API rejects the cart")
    # Only kb-101 holds the identifier: every other hit came from the dense arm alone.
    expect(hits.nth(1).locator(".badge")).to_have_text("semantic")
    expect(hits.nth(1).locator(".rank-lexical")).to_have_text("lexical —")
    # the default fusion is adaptive: the status says it in a short phrase, the details
    # on demand name the dense weight it used and why
    expect(page.locator("#status")).to_contain_text("5 hits · adaptive, ")
    expect(page.locator("#status")).to_contain_text("(dense weight ")
    expect(page.locator("#fusion-long")).to_contain_text("Fusion: adaptive (dense weight ")
    expect(first.locator(".snippet mark")).to_have_text(["ERR-4012"])
    expect(page.locator("#timings dt").first).to_be_visible()
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-search.png"), full_page=True)

    # Keyboard only: Tab to the first hit (visibly focused), Enter opens its journey.
    _focus_first_hit(page)
    outline = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert outline == "solid"
    page.keyboard.press("Enter")
    dialog = page.locator("#debug")
    expect(dialog).to_be_visible()
    expect(page.locator("#debug-title")).to_have_text("Hit #1 — kb-101.md")
    expect(page.locator("#debug-why")).to_contain_text("Why kept: found by both arms (dense #")
    expect(page.locator(".stage-lexical .stage-rank")).to_have_text("#1")
    expect(page.locator(".stage-fused .stage-rank")).to_have_text("#1")
    expect(page.locator(".stage-dense .stage-score")).to_contain_text("vectorScore 0.")
    expect(page.locator(".stage-lexical .stage-score")).to_contain_text("lexicalScore ")
    expect(page.locator("#debug-content")).to_have_text(
        "ERR-4012: checkout API rejects the cart when the session token expired."
    )
    page.screenshot(path=str(ARTIFACTS / "web-debug.png"))
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    assert page.evaluate("document.activeElement.dataset.index") == "0"

    # ArrowDown moves between hits; Enter on the second explains a semantic-only hit.
    page.keyboard.press("ArrowDown")
    page.keyboard.press("Enter")
    expect(page.locator("#debug-why")).to_contain_text("semantic match: no query term matched it")
    expect(page.locator(".stage-lexical .stage-rank")).to_have_text("—")


def test_fusion_controls_and_errors(served: Served, page: Page) -> None:
    page.goto(served.url + "/")
    _enter_key(page, served.tokens["admin_all"], 2, remember=True)  # the admin key covers 'a' and 'b'
    page.locator("#collection").select_option("a")
    page.locator("#fusion").select_option("rrf")  # the lexical-weight slider weighs RRF's arms
    page.locator("#lexical-weight").focus()
    page.keyboard.press("End")  # slider to 1.0: lexical only
    expect(page.locator("#lexical-weight-value")).to_have_text("1.00")
    page.locator("#k").fill("2")
    page.locator("#query").fill("payment declined")
    page.locator("#query").press("Enter")
    expect(page.locator("#hits .hit")).to_have_count(2)
    expect(page.locator("#status")).to_contain_text("2 hits · RRF, lexical weight 1 · ")
    expect(page.locator("#fusion-long")).to_have_text("Fusion: RRF (k=60, lexical weight 1).")
    page.locator("#fusion").select_option("adaptive")  # the status says the query's language
    page.locator("#query").fill("why was the payment declined")
    page.locator("#query").press("Enter")
    expect(page.locator("#fusion-long")).to_contain_text("query language en, embedder languages unknown")
    page.locator("#fusion").select_option("weighted")
    expect(page.locator("#lexical-weight")).to_be_disabled()
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text("weighted sum, dense 0.6 / lexical 0.4")
    expect(page.locator("#fusion-long")).to_have_text("Fusion: weighted (vector 0.6 / lexical 0.4, threshold 0.2).")
    # A server-side validation error is shown as its one-line message.
    page.locator("#k").fill("500")
    page.evaluate("document.getElementById('k').removeAttribute('max')")
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text("Error 422: k: Input should be less than or equal to 200")
    # A remembered key survives a reload (localStorage): collections load without asking.
    assert page.evaluate("localStorage.getItem('plait.apiKey')") == served.tokens["admin_all"]
    assert page.evaluate("sessionStorage.getItem('plait.apiKey')") is None
    page.reload()
    expect(page.locator("#collection option")).to_have_count(2)
    expect(page.locator("#key-state")).to_have_text("admin key (remembered)")


FAQ = Path(__file__).resolve().parents[2] / "examples" / "docs" / "faq.md"
ROTATE = "How do I rotate an API key?"


def test_coverage_panel_and_rerank_control(served: Served, page: Page) -> None:
    page.goto(served.url + "/")
    _enter_key(page, served.tokens["reader_a"], 1)
    # The article's five docs, indexed as documents (no folder root): 5 stored sources,
    # 5 chunks, every one with a vector; present/indexed on disk are unknown (—).
    row = page.locator("#coverage-rows tr[data-scope='docs']")
    expect(row.locator("th")).to_have_text("docs")
    expect(row.locator(".cov-stored")).to_have_text("5")
    expect(row.locator(".cov-chunks")).to_have_text("5")
    expect(row.locator(".cov-without-vector")).to_have_text("0")
    expect(row.locator(".cov-present")).to_have_text("—")
    expect(row.locator(".cov-indexed")).to_have_text("—")
    last = served.engine.coverage(collection="a").scopes[0].last_indexed_at
    expect(row.locator(".cov-last-indexed")).to_have_text(str(last))
    expect(page.locator("#coverage-rows tr")).to_have_count(1)
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "web-coverage.png"), full_page=True)

    # The rerank control sends `rerank`; this server has no LLM, and says so.
    page.locator("#rerank").select_option("llm")
    page.locator("#query").fill("ERR-4012")
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text("rerank='llm' needs an LLM")
    page.locator("#rerank").select_option("")
    page.locator("#query").press("Enter")
    expect(page.locator("#hits .hit")).to_have_count(5)


def _cards(served: Served, tmp_path: Path) -> str:
    """Draft cards in 'a', made by the refinery from the example FAQ; the rotate card's id."""
    folder = tmp_path / "faq"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    served.engine.index(folder, collection="a")
    served.engine.refinery.run("a", mode="extractive")
    return next(c.id for c in served.engine.refinery.cards("a") if c.question == ROTATE)


def test_faq_review_by_a_maintainer_and_a_reader_refused(
    served: Served, page: Page, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    card_id = _cards(served, tmp_path)
    page.goto(served.url + "/")
    _enter_key(page, served.tokens["reader_a"], 1)
    card = page.locator(f"#faq-cards li[data-id='{card_id}']")
    # A reader sees approved cards only (all 16 are drafts) and is offered no review.
    expect(page.locator("#faq-message")).to_have_text("0 cards")
    expect(page.locator("#faq-role")).to_have_text(
        "Reviewing cards needs a maintainer key; this key is a reader (it sees approved cards only)."
    )
    expect(page.locator("#faq-cards li")).to_have_count(0)
    assert served.engine.refinery.get_card("a", card_id).status.value == "draft"

    # A maintainer approves it by keyboard: focus the button, press Enter. The reader's
    # key was in this tab's session storage only: clear it to be asked again.
    assert page.evaluate("localStorage.getItem('plait.apiKey')") is None
    page.evaluate("sessionStorage.clear()")
    page.reload()
    _enter_key(page, served.tokens["maintainer_a"], 1)
    card.locator(".card-approve").focus()
    page.keyboard.press("Enter")
    expect(card.locator(".card-status")).to_have_text("approved")
    expect(card.locator(".card-approve")).to_be_disabled()
    expect(page.locator("#faq-message")).to_have_text("Card approved: " + ROTATE)
    assert served.engine.refinery.get_card("a", card_id).status.value == "approved"
    page.screenshot(path=str(ARTIFACTS / "web-faq.png"), full_page=True)

    page.locator("#faq-status").select_option("approved")
    expect(page.locator("#faq-cards li")).to_have_count(1)
    expect(page.locator("#faq-cards .card-question")).to_have_text(ROTATE)


def test_highlights_count_code_points_like_the_api(served: Served, page: Page) -> None:
    # The API's highlight offsets are Python string offsets (code points); the page sliced
    # UTF-16 units, so an emoji (two units) before a match shifted it: "😀 ERR-4012" with
    # [[2, 10]] showed " ERR-401" (review-4 finding 6)
    page.goto(served.url + "/")
    shown = page.evaluate(
        """async () => {
            const { marked } = await import("/web/dom.js");
            const text = "\\u{1F600} ERR-4012 and \\u{1F680}\\u{1F680} token";
            const node = marked(text, [[2, 10], [18, 23]], "snippet");
            return [...node.querySelectorAll("mark")].map((m) => m.textContent).concat([node.textContent === text]);
        }"""
    )
    assert shown == ["ERR-4012", "token", True]


GATE_QUERY = "refund the declined card"  # content words: refund, declin(ed), card ("the" is a stopword)
GATE_DOCS = {
    "kb-106": "Refund a declined card payment from the orders page.",  # all three words
    "kb-107": "Card readers at the front desk need a weekly restart.",  # card only: 1 of 3
}


def test_explain_shows_the_ask_gate_verdict(served: Served, page: Page) -> None:
    """The explain view showed every stage but the ask gate the API's explain carries
    (``askGate``): whether ask's relevance gate would pass the document, and why."""
    from angles import angle
    from plait.collection_settings import write_settings
    from plait.embeddings.fake import FakeEmbedder
    from plait.sources.base import SourceDocument, SourcePart
    from plait.types import FileOrigin

    embedder, _ = served.engine.embedder_for("a")
    assert isinstance(embedder, FakeEmbedder)
    # hand-placed vectors: the query at 0°, kb-106 at 30° (cosine 0.8660), kb-107 at 60° (0.5000)
    placed = {GATE_QUERY: 0, GATE_DOCS["kb-106"]: 30, GATE_DOCS["kb-107"]: 60}
    embedder.overrides.update({text: np.asarray(angle(deg, 64), dtype=np.float32) for text, deg in placed.items()})
    served.engine.index_documents(documents(GATE_DOCS), collection="a")
    # the gate from the collection's setting, not the (hash-vector) calibration
    saved = write_settings(served.engine.store, "a", ask={"minCosine": 0.8, "minTermCoverage": 0.5})
    calibrated_at = saved.ask_gate["calibratedAt"]  # measured at the end of that index run
    console: list[str] = []
    page.on("console", lambda m: console.append(m.text) if m.type == "error" else None)

    page.goto(served.url + "/")
    _enter_key(page, served.tokens["reader_a"], 1)
    page.locator("#query").fill(GATE_QUERY)
    page.locator("#query").press("Enter")
    expect(page.locator("#hits .hit")).to_have_count(7)
    page.locator("#explain-kind").select_option("doc")
    gate_line = (
        f"Gate: cosine ≥ 0.8000 (setting) or term coverage ≥ 0.50 (setting); calibrated {calibrated_at} "
        "at the end of an index run."
    )
    result = page.get_by_test_id("explain-result")
    stage = result.locator(".stage-ask-gate")

    # kb-106: cosine 0.8660 ≥ 0.8000 passes; lexical and dense rank 1, so fused 1 with the best score
    page.get_by_test_id("explain-path").fill("kb-106")
    page.get_by_test_id("explain-submit").click()
    expect(stage.locator("h3")).to_have_text("Ask gate")
    expect(stage.locator("p")).to_have_text([gate_line, "passed: cosine 0.8660 ≥ 0.8000 (setting)."])
    expect(stage.locator(".gate-verdict")).to_have_class("gate-verdict gate-passed")
    expect(result).to_contain_text("Fused rank 1 (adaptive, score 1.0000, 1.0000 of the best).")
    expect(result).to_contain_text("Fusion: adaptive (dense weight ")
    expect(result.locator("details.chunks tbody td").last).to_have_text("✓ passes")

    # kb-107: cosine 0.5000 < 0.8000, and it holds 1 of the 3 words: 0.33 < 0.50
    page.get_by_test_id("explain-path").fill("kb-107")
    page.get_by_test_id("explain-submit").click()
    expect(stage.locator("p")).to_have_text(
        [gate_line, "failed: cosine 0.5000 < 0.8000; term coverage 0.33 (1 of 3 words) < 0.50."]
    )
    expect(stage.locator(".gate-verdict")).to_have_class("gate-verdict gate-failed")
    expect(result.locator("details.chunks tbody td").last).to_have_text("✗ fails")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#explain-section").screenshot(path=str(ARTIFACTS / "web-explain-ask-gate.png"))

    # A hit's journey (the compact view) carries the same stage: the first hit is kb-106.
    page.locator("#hits .hit").first.focus()
    page.keyboard.press("Enter")
    expect(page.locator("#debug-explain .stage-ask-gate .gate-verdict")).to_have_text(
        "passed: cosine 0.8660 ≥ 0.8000 (setting)."
    )
    page.keyboard.press("Escape")

    # Two chunks: the verdict is the first that passes, named as the page names a chunk
    # (counted from 1, out of its source's chunks). The first holds none of the words
    # (cosine 0.0175 at 89°), the second all three (at 80°).
    intro, body = "Opening hours of the returns desk.", "Card refunds are declined after ninety days."
    embedder.overrides.update({intro: np.asarray(angle(89, 64), dtype=np.float32)})
    embedder.overrides.update({body: np.asarray(angle(80, 64), dtype=np.float32)})
    origin = FileOrigin(source_path="kb-108.md", title="kb-108")
    parts = (SourcePart(text=intro, origin=origin, key="a"), SourcePart(text=body, origin=origin, key="b"))
    served.engine.index_documents(
        [SourceDocument(source_id="kb-108", scope="docs", parts=parts, metadata={"docId": "kb-108"})], collection="a"
    )
    page.get_by_test_id("explain-path").fill("kb-108")
    page.get_by_test_id("explain-submit").click()
    expect(stage.locator(".gate-verdict")).to_have_text(
        "chunk 2 of 2: passed: term coverage 1.00 (3 of 3 words) ≥ 0.50 (setting)."
    )
    expect(result.locator("details.chunks tbody tr td:last-child")).to_have_text(["✗ fails", "✓ passes"])

    # The fusion stage says what identifier precedence did: of the 9 chunks (all fused: the
    # dense arm ranks every one), only kb-103 holds SKU-88213-B, and kb-106 (dense #1, 30°)
    # was fused ahead of it.
    embedder.overrides.update({"SKU-88213-B declined card refund": np.asarray(angle(0, 64), dtype=np.float32)})
    page.locator("#query").fill("SKU-88213-B declined card refund")
    page.get_by_test_id("explain-path").fill("kb-103")
    page.get_by_test_id("explain-submit").click()
    precedence = (
        "1 of the first 9 fused chunks hold every identifier of the query (sku-88213-b) and rank ahead of the 8 "
        "that do not, each group in fused order (1 moved up; the scores stay the fused ones)"
    )
    expect(result).to_contain_text(f"Identifier precedence: {precedence}.")
    traced = served.engine.explain("SKU-88213-B declined card refund", doc="kb-103", collection="a", k=8)
    assert traced.fusion.settings.identifier_reason == precedence
    assert console == []
