"""The status page of a read-only API (no api.admin_token_file) in a real browser: it shows
no admin token field, since there is no operator action to authorize.

    read_only.py URL SCREENSHOT_DIR
"""
import sys

from playwright.sync_api import sync_playwright

url, shots = sys.argv[1:3]

with sync_playwright() as p:
    browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=["--no-sandbox"])
    page = browser.new_page(viewport={"width": 1400, "height": 800})
    page.on("pageerror", lambda e: print("PAGEERROR", e, flush=True))
    page.goto(url)
    page.locator('tr[data-endpoint="gw-1"]').wait_for(timeout=5000)
    assert page.locator("#admin-field").is_hidden(), "the admin token field shows on a read-only API"
    assert page.locator("button.act").count() == 0
    page.screenshot(path=f"{shots}/status-page-read-only.png", full_page=True)
    browser.close()
print("OK", flush=True)
