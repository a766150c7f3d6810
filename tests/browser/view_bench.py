#!/usr/bin/python3
"""How quickly headless chromium opens a `roce view` page and answers a click (a benchmark,
not a test: it prints figures). Usage: view_bench.py PAGE.html [RUNS]

For each run, in a fresh browser: the time from navigation to the page's script having drawn
the ladder (the load event, after which the script has run), then the time from a click on a
frame in the middle of the drawn ladder to #frame-details holding that frame's decode, then a
jump to the last frame of the page (keyboard End) and its details. Prints the medians.
"""

import os
import shutil
import statistics
import sys
import tempfile
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys


def browser():
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium")
    profile = tempfile.mkdtemp(prefix="roce-view-bench-")
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}", "--window-size=1400,1000"]:
        opts.add_argument(flag)
    return webdriver.Chrome(service=Service(shutil.which("chromedriver")), options=opts), profile


def wait_for(driver, script, limit=120.0):
    start = time.monotonic()
    while not driver.execute_script(script):
        if time.monotonic() - start > limit:
            raise TimeoutError(script)
        time.sleep(0.005)
    return time.monotonic() - start


def one_run(page):
    driver, profile = browser()
    try:
        driver.set_page_load_timeout(300)
        start = time.monotonic()
        driver.get("file://" + os.path.abspath(page))  # returns after the load event
        loaded = time.monotonic() - start
        rows = driver.find_elements(By.CSS_SELECTOR, "#ladder-svg [data-frame]")
        target = rows[len(rows) // 2]
        number = target.get_attribute("data-frame")
        start = time.monotonic()
        target.find_element(By.TAG_NAME, "rect").click()
        wait_for(driver, "const s = document.querySelector('#frame-details .summary');"
                 f"return s && s.textContent.startsWith('#{number} ');")
        click = time.monotonic() - start
        start = time.monotonic()
        driver.find_element(By.ID, "ladder").send_keys(Keys.END)
        last = driver.execute_script(
            "const r = document.querySelectorAll('#ladder-svg [data-frame]');"
            "return r[r.length - 1].getAttribute('data-frame');")
        wait_for(driver, "const s = document.querySelector('#frame-details .summary');"
                 "const r = document.querySelectorAll('#ladder-svg [data-frame]');"
                 "return s && s.textContent.startsWith('#' + r[r.length - 1].getAttribute('data-frame') + ' ');")
        end = time.monotonic() - start
        return loaded, click, end, len(rows), number, last
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def main():
    page = sys.argv[1]
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    results = []
    for _ in range(runs):
        with open(page, "rb") as f:  # into the page cache first
            while f.read(1 << 24):
                pass
        results.append(one_run(page))
    med = lambda i: statistics.median(r[i] for r in results)
    size = os.path.getsize(page)
    print(f"{page}: {size / 1e6:.1f} MB, {results[0][3]} rows drawn at first")
    print(f"  load (navigation to load event, script run): median {med(0):.2f} s "
          f"(runs: {', '.join(f'{r[0]:.2f}' for r in results)})")
    print(f"  click a frame -> #frame-details filled:     median {med(1) * 1000:.0f} ms")
    print(f"  End key -> last frame drawn and explained:   median {med(2) * 1000:.0f} ms")


if __name__ == "__main__":
    main()
