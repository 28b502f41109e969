"""The status page in a real browser (Debian's chromium, driven by Playwright), steered by
tests/integration/status_page.rs over stdin/stdout: this script prints a request line
(`KILL gw-2`, `DRAINED gw-1`, ...), the Rust test acts or checks, then answers `OK`.

    status_page.py URL READ_TOKEN ADMIN_TOKEN SCREENSHOT_DIR
"""
import sys
import time

from playwright.sync_api import sync_playwright

url, read_token, admin_token, shots = sys.argv[1:5]


def ask(line):
    """Tells the Rust test what to do or check next; waits for its OK."""
    print(line, flush=True)
    answer = sys.stdin.readline().strip()
    if answer != "OK":
        raise SystemExit(f"{line}: the test answered {answer!r}")


def row(page, name):
    return page.locator(f'tr[data-endpoint="{name}"]')


with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 800})
    page.on("pageerror", lambda e: print("PAGEERROR", e, flush=True))
    page.goto(url)
    # The API has a token: the page asks for it once.
    page.wait_for_selector("#auth", state="visible", timeout=5000)
    page.fill("#token", read_token)
    page.click("#token-go")
    for name in ("gw-1", "gw-2", "gw-3"):
        row(page, name).wait_for(timeout=5000)
    page.wait_for_selector('#live.on', timeout=5000)
    # What happened before the page opened (the first verdicts, the first publish) is on
    # the timeline from the server's recent events.
    page.wait_for_selector("#timeline li", timeout=5000)
    assert "unknown -> up" in page.inner_text("#timeline"), page.inner_text("#timeline")
    # Badges say what they mean on hover.
    assert page.get_attribute("#role", "title").startswith("One replica"), page.get_attribute("#role", "title")
    assert page.get_attribute("#live", "title").startswith("Events stream in"), page.get_attribute("#live", "title")
    assert page.get_attribute('tr[data-tenant="web"] td:nth-child(4)', "title") == "The healthy endpoints are published."
    assert row(page, "gw-2").get_attribute("data-state") == "up"

    # The API takes operator actions: the admin token field shows.
    assert page.locator("#admin-field").is_visible()
    # Without the admin token there are no buttons, and a POST from the page is refused.
    assert page.locator("button.act").count() == 0
    refused = page.evaluate(
        "async () => (await fetch('/v1/endpoints/gw-1/drain', {method: 'POST'})).status")
    assert refused == 401, refused

    # A gateway dies: its row turns down without a reload, within 2 s.
    ask("KILL gw-2")
    started = time.monotonic()
    page.wait_for_selector('tr[data-endpoint="gw-2"][data-state="down"]', timeout=2000)
    print(f"ROW DOWN {1000 * (time.monotonic() - started):.0f} ms", flush=True)
    # The ledger's history: a row per published name, a cell per day of the last 90.
    page.wait_for_selector("#history tr[data-name] .strip i", timeout=5000)
    cells = page.locator("#history tr[data-name] .strip").first.locator("i").count()
    assert cells in (90, 91), cells
    page.screenshot(path=f"{shots}/status-page.png", full_page=True)
    # Times come as RFC 3339: the page shows ages and clock times, never "NaN" or "Invalid Date".
    for part in ("#endpoints", "#tenants", "#timeline", "#history"):
        text = page.inner_text(part)
        assert "NaN" not in text and "Invalid" not in text, (part, text)
    assert page.locator("#timeline li").count() > 0

    # With the admin token: drain from the page, then undrain.
    page.fill("#admin", admin_token)
    with page.expect_response(lambda r: r.url.endswith("/gw-1/drain"), timeout=5000) as drained:
        row(page, "gw-1").locator('button[data-verb="drain"]').click()
    assert drained.value.status == 200, drained.value.text()
    page.wait_for_selector('tr[data-endpoint="gw-1"].drained', timeout=5000)
    ask("DRAINED gw-1")
    page.screenshot(path=f"{shots}/status-page-drained.png", full_page=True)
    with page.expect_response(lambda r: r.url.endswith("/gw-1/undrain")) as undrained:
        row(page, "gw-1").locator('button[data-verb="undrain"]').click()
    assert undrained.value.status == 200, undrained.value.text()
    page.wait_for_selector('tr[data-endpoint="gw-1"]:not(.drained)', timeout=5000)
    ask("UNDRAINED gw-1")

    # gw-3 has two checks (HTTP and TCP): each one's verdict shows beside its state.
    checks = row(page, "gw-3").locator(".checks").inner_text()
    assert checks.startswith("http") and "tcp" in checks and "(2 of 2)" in checks, checks

    # Force gw-3 down from the page, then release it.
    with page.expect_response(lambda r: r.url.endswith("/gw-3/force-down")) as forced:
        row(page, "gw-3").locator('button[data-verb="force-down"]').click()
    assert forced.value.status == 200, forced.value.text()
    page.wait_for_selector('tr[data-endpoint="gw-3"][data-forced="down"]', timeout=5000)
    ask("FORCED DOWN gw-3")
    with page.expect_response(lambda r: r.url.endswith("/gw-3/release")) as released:
        row(page, "gw-3").locator('button[data-verb="release"]').click()
    assert released.value.status == 200, released.value.text()
    page.wait_for_selector('tr[data-endpoint="gw-3"]:not([data-forced])', timeout=5000)
    ask("RELEASED gw-3")

    # An impaired prober, a brake holding withdrawals and a reported weight, as /status
    # reports them (the states themselves are the tracker's, tested in its own tests,
    # vantage.rs and weights.rs): this checks only how the page shows them, so /status is
    # answered with them set.
    def impaired(route):
        body = route.fetch().json()
        body["impaired"] = True
        body["tenants"][0]["brake_held"] = 2
        body["endpoints"][0]["reported_weight"] = 42
        route.fulfill(json=body)
    page.route("**/status", impaired)
    page.evaluate("refresh()")
    page.wait_for_selector("#impaired", state="visible", timeout=5000)
    assert page.locator("#release-brake").is_visible()
    held = page.inner_text('tr[data-tenant="web"]')
    assert "2 withdrawals held" in held, held
    weighted = row(page, "gw-1").inner_text()
    assert "weight 42" in weighted, weighted
    page.screenshot(path=f"{shots}/status-page-impaired.png", full_page=True)
    page.unroute("**/status")
    with page.expect_response(lambda r: r.url.endswith("/v1/brake/release")) as release:
        page.click("#release-brake")
    assert release.value.status == 200, release.value.text()
    page.wait_for_selector("#impaired", state="hidden", timeout=5000)
    browser.close()
print("DONE", flush=True)
