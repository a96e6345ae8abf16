"""The dashboard end to end in headless Chromium (Playwright driving Debian's /usr/bin/chromium): type a bad
scenario and see the CLI's message inline, plan it, hover a chart point and read its numbers, compare two plans;
screenshots are decoded and checked for the charts' GPU colours."""

from __future__ import annotations

import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the dashboard extra is not installed (pip install '.[dashboard]')")
sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install '.[test]')")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
if CHROMIUM is None:
    pytest.skip("no Chromium on this machine (Debian: apt-get install chromium)", allow_module_level=True)

import uvicorn  # noqa: E402

from scaleright import charts  # noqa: E402
from scaleright.dashboard.app import create_app  # noqa: E402
from tests.dashboard.png import colour_share, read_png  # noqa: E402

pytestmark = pytest.mark.slow
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync"]  # fmt: skip


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def base_url():
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started and time.monotonic() < deadline:
        time.sleep(0.05)
    assert server.started, "the dashboard did not start"
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield b
        b.close()


def _rgb(hex_colour: str) -> tuple[int, int, int]:
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))  # type: ignore[return-value]


def test_edit_validate_plan_hover_and_screenshot(browser, base_url, tmp_path: Path):
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    page.goto(f"{base_url}/?example=lora-7b-one-gpu")
    editor = page.locator("#scenario")
    good = editor.input_value()
    assert "model:" in good
    editor.fill(good + "\ncolour: blue\n")  # inline validation: the CLI's one-line message, while typing
    page.wait_for_selector("#scenario-error:not([hidden])", timeout=15000)
    assert "colour" in page.locator("#scenario-error").inner_text()
    editor.fill(good)
    page.wait_for_selector("#scenario-ok:not([hidden])", timeout=15000)
    page.click("#plan-button")
    page.wait_for_selector("[data-chart=pareto] .main-svg", timeout=60000)
    assert "Best option per GPU type" in page.content()
    point = page.locator("[data-chart=pareto] .scatterlayer .trace .points path").first
    point.hover(force=True)
    page.wait_for_selector(".hoverlayer .hovertext", timeout=10000)
    tip = page.locator(".hoverlayer .hovertext").first.text_content() or ""
    assert " × " in tip and "$" in tip and " h" in tip  # GPUs × type, cost, hours from the plan
    shot = tmp_path / "plan.png"
    page.locator("[data-chart=pareto]").screenshot(path=str(shot))
    width, height, rows = read_png(shot.read_bytes())
    assert width > 300 and height > 200
    first_gpu = charts.PALETTE[0]
    marker_px = 40  # a 9 px marker covers about 60 pixels
    assert colour_share(rows, _rgb(first_gpu)) * width * height >= marker_px, "no marker in the first GPU's colour"
    white = colour_share(rows, (255, 255, 255), 4)
    assert 0.3 < white < 0.995, f"a blank or a solid chart ({white:.1%} white)"
    page.close()


def test_compare_two_plans_side_by_side(browser, base_url, tmp_path: Path):
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(f"{base_url}/compare")
    page.click("#compare-button")
    page.wait_for_selector(".plan-2 .main-svg", timeout=90000)
    left, right = page.locator(".plan-1 h2").first.inner_text(), page.locator(".plan-2 h2").first.inner_text()
    assert left.startswith("A: ") and right.startswith("B: ") and left[3:] != right[3:]
    box1, box2 = page.locator(".plan-1").bounding_box(), page.locator(".plan-2").bounding_box()
    assert box1 and box2 and box1["x"] + box1["width"] <= box2["x"] + 1  # side by side, not stacked
    shot = tmp_path / "compare.png"
    page.screenshot(path=str(shot), full_page=False)
    assert read_png(shot.read_bytes())[0] == 1400
    page.close()


def test_catalog_search_in_the_browser(browser, base_url):
    page = browser.new_page()
    page.goto(f"{base_url}/catalog")
    page.fill("input[name=q]", "hopper")
    page.click("form.search button")
    page.wait_for_load_state()
    rows = page.locator("table.catalog tbody tr")
    assert rows.count() >= 2 and all("opper" in rows.nth(i).inner_text() for i in range(rows.count()))
    page.close()
