"""The search & debug page in headless Chromium (Debian's /usr/bin/chromium, driven by
playwright), against a real server with auth on: key, search, badges, ranks, and the
keyboard path to a hit's journey. Screenshots go to test-artifacts/ (gitignored)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="needs the server extra: pip install 'plait[server]'")
pytest.importorskip("playwright", reason="needs playwright (the test extra)")

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip("Debian's chromium is not installed: apt-get install -y chromium", allow_module_level=True)

from http_served import Served, serve_engine  # noqa: E402
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


def _enter_key(page: Page, token: str, collections: int) -> None:
    expect(page.locator("#key-form")).to_be_visible()
    expect(page.locator("#status")).to_contain_text("401")
    page.locator("#api-key").fill(token)
    page.locator("#api-key").press("Enter")
    expect(page.locator("#collection option")).to_have_count(collections)


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
    expect(page.locator("#status")).to_contain_text("5 hits · RRF (k=60, lexical weight 0.5)")
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
    _enter_key(page, served.tokens["admin_all"], 2)  # the admin key covers 'a' and 'b'
    page.locator("#collection").select_option("a")
    page.locator("#lexical-weight").focus()
    page.keyboard.press("End")  # slider to 1.0: lexical only
    expect(page.locator("#lexical-weight-value")).to_have_text("1.00")
    page.locator("#k").fill("2")
    page.locator("#query").fill("payment declined")
    page.locator("#query").press("Enter")
    expect(page.locator("#hits .hit")).to_have_count(2)
    expect(page.locator("#status")).to_contain_text("2 hits · RRF (k=60, lexical weight 1)")
    page.locator("#fusion").select_option("weighted")
    expect(page.locator("#lexical-weight")).to_be_disabled()
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text("weighted (vector 0.6 / lexical 0.4, threshold 0.2)")
    # A server-side validation error is shown as its one-line message.
    page.locator("#k").fill("500")
    page.evaluate("document.getElementById('k').removeAttribute('max')")
    page.locator("#query").press("Enter")
    expect(page.locator("#status")).to_contain_text("Error 422: k: Input should be less than or equal to 200")
    # The key survives a reload (localStorage): collections load without asking again.
    page.reload()
    expect(page.locator("#collection option")).to_have_count(2)
