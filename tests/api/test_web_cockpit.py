"""The page as the retrieval-debug cockpit, in headless Chromium (Debian's /usr/bin/chromium
through playwright) against a real server with auth on, over a folder of Markdown:

"why not found?" with completion and the same trace as the API, the three arm lists,
readable hits (marked snippets, sanitised Markdown, a hostile document left inert),
coverage with embedding progress, FAQ review with edit, the key prompt and its storage,
and the quality bar: no console errors or failed requests, keyboard use, 390 px, and
axe-core (vendored under tests/api/vendor/axe-core, MPL-2.0) with no serious violations.

Screenshots go to test-artifacts/ (gitignored); the two in docs/ are copies of
web-cockpit-search.png and web-why-not-found.png.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("nh3", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("playwright", reason="needs playwright (the test extra)")

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed: apt-get install -y chromium", allow_module_level=True)

from playwright.sync_api import Page, expect, sync_playwright  # noqa: E402

from plait.api.http import create_app  # noqa: E402
from plait.api.keys import KeyStore  # noqa: E402
from plait.embeddings.fake import FakeEmbedder  # noqa: E402
from plait.service import Plait  # noqa: E402
from plait.testing.asgi_server import UvicornThread  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
ARTIFACTS = ROOT / "test-artifacts"
AXE = Path(__file__).resolve().parent / "vendor" / "axe-core" / "axe.min.js"
FAQ = ROOT / "examples" / "docs" / "faq.md"
ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--disable-sync", "--no-first-run",
]
HOSTILE = (
    '# Hostile \\<img src=x onerror="window.__pwned=1"\\>\n\n'
    "Read <script>window.__pwned=2</script> **bold** words about quarantined payloads. "
    '<img src=x onerror="window.__pwned=3"> <a href="javascript:window.__pwned=4">click</a> '
    '<span onmouseover="window.__pwned=5">hover</span>\n'
)
FILES = {
    "guide.md": "# Guide\n\n## Checkout errors\n\nERR-4012: the checkout API rejects the cart when the session token expired.\n",
    "payments.md": "# Payments\n\n## Declined cards\n\nWhy was my payment declined? The bank refused the purchase.\n",
    "hostile.md": HOSTILE,
    "adr/0001-retries.md": "# ADR 0001: Retries\n\nRetry the checkout call three times with backoff.\n",
    "rollback.md": "# Rollback\n\nRollback steps for a bad release of the checkout service.\n",
}


@dataclass
class Server:
    url: str
    engine: Plait
    tokens: dict[str, str]
    root: Path


@dataclass
class Watched:
    """A page whose console errors, page errors and failed requests are recorded."""

    page: Page
    problems: list[str] = field(default_factory=list)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    root = tmp_path / "docs"
    for name, text in FILES.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text, encoding="utf-8")
    with Plait(str(tmp_path / "plait.db"), embedder=FakeEmbedder(dimension=64)) as engine:
        engine.index(root, collection="f")
        keys = KeyStore(tmp_path / "keys.db")
        tokens = {
            "reader": keys.create(role="reader", collection="f")[1],
            "maintainer": keys.create(role="maintainer", collection="f")[1],
            "admin": keys.create(role="admin", collection="*")[1],
        }
        try:
            with UvicornThread(create_app(engine, auth=True, keys=keys, default_collection="f")) as running:
                yield Server(url=running.url, engine=engine, tokens=tokens, root=root)
        finally:
            keys.close()


@pytest.fixture
def watched(server: Server) -> Iterator[Watched]:
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(20_000)
        w = Watched(page)
        page.on("pageerror", lambda exc: w.problems.append(f"page error: {exc}"))
        page.on("console", lambda m: w.problems.append(f"console {m.type}: {m.text}") if m.type == "error" else None)
        page.on("requestfailed", lambda r: w.problems.append(f"request failed: {r.url}"))
        page.on("response", lambda r: w.problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        yield w
        browser.close()


def _key(page: Page, token: str, *, remember: bool = False) -> None:
    expect(page.locator("#key-prompt")).to_be_visible()
    page.locator("#api-key").fill(token)
    if remember:
        page.locator("#remember-key").check()
    page.locator("#api-key").press("Enter")
    expect(page.locator("#key-prompt")).to_be_hidden()
    expect(page.locator("#collection option").first).to_be_attached()


def _search(page: Page, query: str, *, k: int | None = None) -> None:
    if k is not None:
        page.locator("#k").fill(str(k))
    page.locator("#query").fill(query)
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text(" hit")
    expect(page.locator("#arm-fused .arm-entry").first).to_be_visible()


def _axe(page: Page) -> list[str]:
    # Evaluated through the DevTools protocol: the page's CSP (no inline scripts) stays on.
    page.evaluate(AXE.read_text(encoding="utf-8") + "\n;undefined")
    result = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".filter(v => v.impact === 'serious' || v.impact === 'critical')"
        ".map(v => v.id + ': ' + v.help + ' — ' + v.nodes.map(n => n.target.join(' ')).join(', '))"
    )
    return list(result)


def test_why_not_found_shows_the_api_trace_with_completion(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["reader"])
    _search(page, "the ERR-4012 checkout", k=1)

    # Completion from the collection's sources, narrowed as one types.
    field = page.get_by_test_id("explain-path")
    field.fill("ro")
    expect(page.locator("#explain-sources option")).to_have_count(1)
    assert page.locator("#explain-sources option").get_attribute("value") == "rollback.md"

    # rollback.md shares "checkout" only: the API's own trace and diagnosis, on the page.
    field.fill("rollback.md")
    page.get_by_test_id("explain-submit").click()
    result = page.get_by_test_id("explain-result")
    expected = server.engine.explain("the ERR-4012 checkout", path="rollback.md", collection="f", k=1)
    expect(result.locator(".diagnosis")).to_have_text(
        f"Diagnosis ({expected.diagnosis.code.value}): {expected.diagnosis.message}"
    )
    assert expected.fusion.returned is False  # k=1 and guide.md holds the identifier
    lexical = expected.lexical
    assert lexical.rank is not None
    expect(result).to_contain_text(
        f"BM25: rank {lexical.rank} of {lexical.candidates} (score {lexical.score:.4f}), within the over-fetch of 50."
    )
    dense = expected.dense
    assert dense.rank is not None
    expect(result).to_contain_text(f"Vectors: rank {dense.rank} of {dense.candidates} (score {dense.score:.4f})")
    expect(result).to_contain_text(f"Fused rank {expected.fusion.rank} (adaptive")
    expect(result).to_contain_text("Cut: dropped by top-k (top 1).")
    # Per term and field: the stopword, the identifier that is not there, the word that is.
    rows = result.locator("table.terms tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0)).to_contain_text("stopword: not searched")
    expect(rows.nth(1).locator("th")).to_have_text("ERR-4012")
    expect(rows.nth(1)).to_contain_text("err-4012 ✗ not in chunk")
    expect(rows.nth(1)).to_contain_text("identifier: kept whole in the exact field")
    expect(rows.nth(2)).to_contain_text("checkout ✓ matched")
    # Every chunk of the document, with exact ranks.
    expect(result.locator("details.chunks summary")).to_have_text("Each chunk of the document (1)")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#explain-section").screenshot(path=str(ARTIFACTS / "web-why-not-found.png"))

    # A path never indexed: the ingestion stage says so; a chunk id is recognised by its shape.
    field.fill("missing.md")
    page.get_by_test_id("explain-submit").click()
    expect(result.locator(".diagnosis")).to_contain_text("Diagnosis (not-indexed): ingestion: no recorded root yields path 'missing.md'")
    (chunk_id,) = server.engine.store.chunk_ids("f", "guide.md")
    field.fill(chunk_id)
    page.get_by_test_id("explain-submit").click()
    expect(result.locator(".diagnosis")).to_contain_text("Diagnosis (found): returned at position 1")
    assert watched.problems == []


WIDGET = (
    "# Widget guide\n\n## Overview\n\nThe widget keeps inventory counts in step across warehouses.\n\n"
    "## Setup\n\nInstall the widget daemon, then set the sync interval in widget.toml.\n\n"
    "## Troubleshooting\n\nWhen counts drift, restart the daemon and check the logs.\n"
)
WIDGET_QUERY = "install sync interval"  # its three words are in §Setup alone


def test_why_not_found_names_each_stages_chunk_in_a_multi_chunk_document(
    server: Server, watched: Watched, tmp_path: Path
) -> None:
    """The explain view said "rank 1" for the lexical arm, the dense arm and fusion without
    saying of which chunk, and its chunk table left out the scores and why a chunk was cut:
    in widget.md the lexical arm's best chunk (§Setup) is not the dense arm's (§Overview)."""
    from angles import angle
    from plait.collection_settings import write_settings
    from plait.fields import embedding_text
    from plait.types import heading_path

    engine = server.engine
    embedder, _ = engine.embedder_for("f")
    assert isinstance(embedder, FakeEmbedder)
    # The texts the dense arm embeds for widget.md's chunks, read off a scratch collection;
    # then placed: the query at 0°, §Overview at 10°, §Setup at 20°, §Troubleshooting at 30°.
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "widget.md").write_text(WIDGET, encoding="utf-8")
    engine.index(scratch, collection="scratch")
    stored = engine.store.get_chunks("scratch", engine.store.chunk_ids("scratch", "widget.md"))
    texts = {heading_path(c.origin)[-1]: embedding_text(c) for c in stored.values()}
    placed = {WIDGET_QUERY: 0, texts["Overview"]: 10, texts["Setup"]: 20, texts["Troubleshooting"]: 30}
    embedder.overrides.update({text: np.asarray(angle(deg, 64), dtype=np.float32) for text, deg in placed.items()})
    (server.root / "widget.md").write_text(WIDGET, encoding="utf-8")
    engine.index(server.root, collection="f")
    write_settings(engine.store, "f", ask={"minCosine": 0.95, "minTermCoverage": 0.5})
    overview, setup, troubleshooting = engine.store.chunk_ids("f", "widget.md")

    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["reader"])
    page.locator("#fusion").select_option("rrf")
    _search(page, WIDGET_QUERY, k=1)
    page.get_by_test_id("explain-path").fill("widget.md")
    page.get_by_test_id("explain-submit").click()
    result = page.get_by_test_id("explain-result")
    stages = result.locator(".stages > li")
    expect(stages.locator("h3")).to_have_text(["Ingestion", "Lexical arm", "Dense arm", "Fusion and cut", "Ask gate"])
    # Each stage names its chunk (the id on hover): BM25 ranks §Setup first (1 of 1: no
    # other chunk holds a query word), the vectors §Overview (cos 10° = 0.9848), and RRF
    # fuses §Setup first: 1/61 + 1/62 = 0.0325 over §Overview's 1/61; of RRF's best, 2/61: 0.9919.
    named = "About chunk {} of 3 (Widget guide › {})"
    expect(stages.nth(1).locator(".stage-chunk")).to_have_text(named.format(2, "Setup"))
    expect(stages.nth(1)).to_contain_text("BM25: rank 1 of 1 (score ")
    expect(stages.nth(1).locator("table.terms caption")).to_have_text(
        "Each query word against the two lexical fields of chunk 2 of 3 (Widget guide › Setup)"
    )
    expect(stages.nth(2).locator(".stage-chunk")).to_have_text(named.format(1, "Overview"))
    expect(stages.nth(2)).to_contain_text("Vectors: rank 1 of 8 (score 0.9848), within the over-fetch of 50.")
    expect(stages.nth(3).locator(".stage-chunk")).to_have_text(named.format(2, "Setup"))
    expect(stages.nth(3)).to_contain_text("Fused rank 1 (rrf, score 0.0325, 0.9919 of the best).")
    for n, chunk_id in ((1, setup), (2, overview), (3, setup)):
        expect(stages.nth(n).locator(".chunk-ref")).to_have_attribute("title", f"chunk id {chunk_id}")
    # The ask gate: §Overview is the first chunk to pass (cosine 0.9848 ≥ 0.95).
    expect(stages.nth(4).locator(".gate-verdict")).to_have_text(
        "chunk 1 of 3 (Widget guide › Overview): passed: cosine 0.9848 ≥ 0.9500 (setting)."
    )

    # The chunk table, open: ranks with scores in each arm, fusion, and the cut with its reason.
    table = result.locator("details.chunks")
    expect(table).to_have_attribute("open", "")
    expect(table.locator("thead th")).to_have_text(
        ["chunk", "headings", "stages about it", "lexical (BM25)", "dense (cosine)", "fused (score)", "page",
         "vector", "ask gate"]
    )
    rows = table.locator("tbody tr")
    expect(rows).to_have_count(3)
    expect(rows.nth(0).locator("th, td")).to_have_text(
        ["1 of 3", "Widget guide › Overview", "dense, ask gate", "—", "#1 · 0.9848", "#2 · 0.0164",
         "✗ top-k: fused past the top 1", "yes", "✓ passes"]
    )
    lexical = engine.explain(WIDGET_QUERY, path="widget.md", collection="f", k=1, fusion="rrf").lexical
    assert lexical.chunk_id == setup and lexical.score is not None
    expect(rows.nth(1).locator("th, td")).to_have_text(
        ["2 of 3", "Widget guide › Setup", "lexical, fused", f"#1 · {lexical.score:.4f}", "#2 · 0.9397",
         "#1 · 0.0325", "✓ returned", "yes", "✓ passes"]
    )
    expect(rows.nth(2).locator("th, td")).to_have_text(
        ["3 of 3", "Widget guide › Troubleshooting", "—", "—", "#3 · 0.8660", "#3 · 0.0159",
         "✗ top-k: fused past the top 1", "yes", "✗ fails"]
    )
    for n, chunk_id in enumerate((overview, setup, troubleshooting)):
        expect(rows.nth(n).locator("th .chunk-ref")).to_have_attribute("title", f"chunk id {chunk_id}")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("#explain-section").screenshot(path=str(ARTIFACTS / "web-why-not-found-chunks.png"))
    assert watched.problems == []


def test_three_arm_columns_show_each_chunks_movement(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["reader"])
    _search(page, "ERR-4012", k=3)
    arms = server.engine.arms("f", {"query": "ERR-4012", "k": 3})
    guide = server.engine.store.chunk_ids("f", "guide.md")[0]
    lexical = page.get_by_test_id("arm-lexical").locator(".arm-entry")
    dense = page.get_by_test_id("arm-dense").locator(".arm-entry")
    fused = page.locator("#arm-fused .arm-entry")
    # Only guide.md holds the identifier: one lexical entry; the dense arm ranks all five.
    expect(lexical).to_have_count(1)
    expect(dense).to_have_count(5)
    expect(fused).to_have_count(5)
    g = arms.lexical[0]
    assert g.chunk_id == guide and g.fused_rank == 1
    expect(lexical.nth(0).locator(".arm-name")).to_have_text("guide.md › Checkout errors")
    expect(lexical.nth(0).locator(".arm-move")).to_have_text(f"→ fused #1 · dense #{g.dense_rank}")
    # The fused list says where each came from; the three returned ones are marked.
    for n, entry in enumerate(arms.fused):
        lex = "—" if entry.lexical_rank is None else f"#{entry.lexical_rank}"
        expect(fused.nth(n).locator(".arm-move")).to_have_text(f"lexical {lex} · dense #{entry.dense_rank}")
    expect(page.locator("#arm-fused .tag-returned")).to_have_count(3)
    if g.dense_rank is not None and g.dense_rank > 3:
        expect(fused.nth(0).locator(".tag-rescue")).to_have_text("lexical rescue")
    # One colour per chunk in every list, and focus marks it in the others.
    colour = lexical.nth(0).get_attribute("class")
    assert colour is not None and " c0" in colour
    guide_dense = page.locator(f"#arm-dense .arm-entry[data-chunk='{guide}']")
    assert guide_dense.get_attribute("class") == colour
    lexical.nth(0).focus()
    expect(guide_dense).to_have_class(colour + " linked")
    expect(page.locator(f"#arm-fused .arm-entry[data-chunk='{guide}']")).to_have_class(colour + " linked")
    # Enter on an entry opens that chunk.
    page.keyboard.press("Enter")
    expect(page.locator("#debug-title")).to_have_text("Hit #1 — guide.md › Guide › Checkout errors")
    page.keyboard.press("Escape")
    assert watched.problems == []


def test_hits_are_readable_and_a_hostile_document_stays_inert(server: Server, watched: Watched) -> None:
    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["reader"])
    _search(page, "ERR-4012 session token", k=3)
    first = page.locator("#hits .hit").first
    # The snippet is plain text (no "##") with the matched words marked (the API's highlights).
    expect(first.locator(".snippet")).to_have_text(
        "Checkout errors ERR-4012: the checkout API rejects the cart when the session token expired."
    )
    expect(first.locator(".snippet mark")).to_have_text(["ERR-4012", "session", "token"])
    expect(first.locator(".origin")).to_have_text("guide.md › Guide › Checkout errors")
    expect(first.locator(".origin .crumb")).to_have_count(3)
    expect(first.locator(".why-short")).to_contain_text("found by both arms")
    ARTIFACTS.mkdir(exist_ok=True)
    page.locator("main").screenshot(path=str(ARTIFACTS / "web-cockpit-search.png"))

    _search(page, "quarantined payloads", k=3)
    hostile = page.locator("#hits .hit").first
    expect(hostile.locator(".origin")).to_contain_text("hostile.md")
    expect(hostile.locator(".snippet mark")).to_have_text(["quarantined", "payloads"])
    hostile.focus()
    page.keyboard.press("Enter")
    rendered = page.locator("#debug-rendered")
    expect(rendered.locator("strong")).to_have_text("bold")
    expect(rendered.locator("a")).to_have_text("click")
    assert rendered.locator("a").get_attribute("href") is None
    for selector in ("script", "img", "[onerror]", "[onmouseover]", "[style]"):
        assert page.locator(f"#debug-rendered {selector}").count() == 0, selector
    # An escaped tag in the heading is text: in the title (textContent) and in the rendering.
    expect(page.locator("#debug-title")).to_have_text('Hit #1 — hostile.md › Hostile <img src=x onerror="window.__pwned=1">')
    expect(hostile.locator(".origin")).to_have_text('hostile.md › Hostile <img src=x onerror="window.__pwned=1">')
    expect(rendered.locator("h1")).to_have_text('Hostile <img src=x onerror="window.__pwned=1">')
    expect(page.locator("#debug-content")).to_contain_text("<script>window.__pwned=2</script>")
    rendered.locator("span").hover()
    assert page.evaluate("window.__pwned") is None
    assert page.locator("#hits img, .arms img, #debug img").count() == 0
    # The dialog also carries the per-term detail for this hit.
    expect(page.locator("#debug-explain table.terms tbody tr")).to_have_count(2)
    expect(page.locator("#debug-explain .diagnosis")).to_contain_text("Diagnosis (")
    page.keyboard.press("Escape")
    assert watched.problems == []


def test_coverage_follows_the_backfill(server: Server, watched: Watched, tmp_path: Path) -> None:
    folder = tmp_path / "pending"
    folder.mkdir()
    for n in range(3):
        (folder / f"p{n}.md").write_text(f"# Page {n}\n\nPending vector number {n}.\n", encoding="utf-8")
    server.engine.index(folder, collection="p", backfill=False)
    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["admin"])
    page.locator("#collection").select_option("p")
    row = page.locator("#coverage-rows tr[data-scope='docs']")
    expect(row.locator(".cov-present")).to_have_text("3")
    expect(row.locator(".cov-indexed")).to_have_text("3")
    expect(row.locator(".cov-chunks")).to_have_text("3")
    expect(row.locator(".cov-without-vector")).to_have_text("3")
    expect(page.locator("#embed-label")).to_have_text("Embedding: 0 of 3 chunks have a vector (0%); 3 still without one")
    assert page.locator("#embed-progress").evaluate("p => [p.value, p.max]") == [0, 3]
    expect(page.locator("#coverage-roots li")).to_have_text([f"folder {folder}: 3 sources present"])
    server.engine.backfill(collection="p")  # the page polls while vectors are missing
    expect(page.locator("#embed-label")).to_have_text("Every one of the 3 chunks has a vector (hash-64)")
    expect(row.locator(".cov-without-vector")).to_have_text("0")
    assert watched.problems == []


def test_faq_review_with_edit_by_a_maintainer(
    server: Server, watched: Watched, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in ("PLAIT_LLM", "PLAIT_LLM_MODEL", "PLAIT_OLLAMA_URL"):
        monkeypatch.delenv(name, raising=False)
    folder = tmp_path / "faq"
    folder.mkdir()
    (folder / "faq.md").write_text(FAQ.read_text(encoding="utf-8"), encoding="utf-8")
    server.engine.index(folder, collection="f")
    server.engine.refinery.run("f", mode="extractive")
    card = next(c for c in server.engine.refinery.cards("f") if c.question == "How do I rotate an API key?")
    page = watched.page
    page.goto(server.url + "/")
    _key(page, server.tokens["maintainer"])
    review = page.get_by_test_id("faq-review")
    item = review.locator(f"li[data-id='{card.id}']")
    expect(item.locator(".card-status")).to_have_text("draft")
    item.locator(".card-edit").focus()
    page.keyboard.press("Enter")
    answer = item.locator("textarea.edit-answer")
    expect(item.locator("textarea.edit-question")).to_be_focused()
    answer.fill("Roll the key under Developers › API keys, deploy it, then let the old one expire.")
    item.locator(".card-save").click()
    expect(item.locator(".card-answer")).to_have_text(
        "Roll the key under Developers › API keys, deploy it, then let the old one expire."
    )
    expect(page.locator("#faq-message")).to_have_text("Card edited: How do I rotate an API key?")
    assert server.engine.refinery.get_card("f", card.id).answer.startswith("Roll the key under")
    item.locator(".card-reject").click()
    expect(item.locator(".card-status")).to_have_text("rejected")
    assert server.engine.refinery.get_card("f", card.id).status.value == "rejected"
    assert watched.problems == []


def test_key_prompt_storage_keyboard_narrow_screen_and_axe(server: Server, watched: Watched) -> None:
    page = watched.page
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(server.url + "/")
    # A prompt, not an error, and no request was refused on the way (favicon included).
    expect(page.locator("#key-prompt")).to_be_visible()
    expect(page.locator("#api-key")).to_be_focused()
    page.keyboard.type(server.tokens["reader"])
    page.keyboard.press("Enter")
    expect(page.locator("#key-state")).to_have_text("reader key for f (this tab only)")
    assert page.evaluate("sessionStorage.getItem('plait.apiKey')") == server.tokens["reader"]
    assert page.evaluate("localStorage.getItem('plait.apiKey')") is None

    # Keyboard only: the query has focus; type, Enter, Tab to the first hit, Enter opens it.
    expect(page.locator("#query")).to_be_focused()
    page.keyboard.type("why was my payment declined")
    page.keyboard.press("Enter")
    expect(page.locator("#hits .hit").first).to_be_visible()
    expect(page.locator("#arm-fused .arm-entry").first).to_be_visible()
    for _ in range(15):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.classList.contains('hit')"):
            break
    else:
        pytest.fail("Tab never reached a hit")
    # 390 px: nothing wider than the screen.
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    page.keyboard.press("Enter")
    expect(page.locator("#debug")).to_be_visible()
    expect(page.locator("#debug-explain .diagnosis")).to_be_visible()
    expect(page.locator("#debug-rendered p").first).to_be_visible()
    assert _axe(page) == []
    page.keyboard.press("Escape")
    page.get_by_test_id("explain-path").fill("payments.md")
    page.get_by_test_id("explain-submit").click()
    expect(page.get_by_test_id("explain-result").locator(".diagnosis")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= 390
    assert _axe(page) == []

    # The session-stored key is gone in a new tab's session; a wrong key is asked again.
    fresh = page.context.new_page()
    fresh.goto(server.url + "/")
    expect(fresh.locator("#key-prompt")).to_be_visible()
    fresh.close()
    assert watched.problems == []


def test_a_server_without_keys_asks_for_none(server: Server) -> None:
    app = create_app(server.engine, auth=False, default_collection="f")
    with UvicornThread(app) as open_server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=ARGS)
        page = browser.new_page()
        problems: list[str] = []
        page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
        page.on("response", lambda r: problems.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        page.goto(open_server.url + "/")
        expect(page.locator("#collection option")).to_have_text(["f (5 chunks)"])
        expect(page.locator("#key-prompt")).to_be_hidden()
        expect(page.locator("#change-key")).to_be_hidden()
        expect(page.locator("#faq-role")).to_have_text("")  # acts as an admin: review offered
        _search(page, "ERR-4012", k=2)
        expect(page.locator("#hits .hit")).to_have_count(2)
        browser.close()
        assert problems == []
