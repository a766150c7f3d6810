#!/usr/bin/python3
"""`roce view` in a real browser (headless Debian chromium through chromium-driver).

For each capture: write its view, open it, and check what a person would see against what
`roce analyze --json` and `roce decode --json` say: no console errors; one `data-frame`
element per packet of the first flow's exchange; clicking a frame fills #frame-details with
the decode --json keys and values of that frame and the summary line of `roce decode`; the
arrow keys move the selection. Then bad input: a cut capture shows a damage banner, an empty
one says so, HTML in a file name is shown as text. Screenshots go to $ROCE_ARTIFACTS (default
target/browser-artifacts). Needs: chromium, chromium-driver, python3-selenium (Debian).
Usage: view_needs_browser.py ROCE_BINARY
"""

import json
import os
import shutil
import struct
import subprocess
import sys
import tempfile

try:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
except ImportError:
    sys.exit("view_needs_browser: python3-selenium is missing (apt-get install python3-selenium)")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CAPTURES = ["rc_loss_write", "rc_rnr_nak", "rdma_cm_rping", "ud_send", "rc_ipv6",
            "rc_atomic_fetch_add", "rc_read"]
PASSED, FAILED = [], []


def roce(*args, check=True):
    out = subprocess.run([ROCE, *args], capture_output=True, text=True)
    if check and out.returncode not in (0, 2, 3):
        raise RuntimeError(f"roce {' '.join(args)}: exit {out.returncode}: {out.stderr}")
    return out


def flatten(obj, prefix=""):
    """decode --json's object as the page lists it: `outer.inner` keys, values as JSON."""
    flat = {}
    for key, value in obj.items():
        name = f"{prefix}.{key}" if prefix else key
        if isinstance(value, dict):
            flat.update(flatten(value, name))
        else:
            flat[name] = value
    return flat


def browser():
    binary = shutil.which("chromium")
    driver_path = shutil.which("chromedriver")
    if not binary or not driver_path:
        sys.exit("view_needs_browser: chromium and chromium-driver are missing "
                 "(apt-get install chromium chromium-driver)")
    opts = webdriver.ChromeOptions()
    opts.binary_location = binary
    profile = tempfile.mkdtemp(prefix="roce-view-chromium-")
    for flag in ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run",
                 "--disable-dev-shm-usage", f"--user-data-dir={profile}",
                 "--window-size=1400,1000"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=opts), profile


def check(name, condition, detail=""):
    (PASSED if condition else FAILED).append(name)
    if not condition:
        print(f"FAIL {name}: {detail}", flush=True)


def console_errors(driver):
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]


def open_view(driver, html):
    driver.get("file://" + html)
    driver.get_log("browser")  # what loading logged is checked by the caller


def frame_details(driver):
    rows = driver.find_elements(By.CSS_SELECTOR, "#frame-details tr[data-key]")
    return {r.get_attribute("data-key"): json.loads(r.get_attribute("data-value")) for r in rows}


def click_frame(driver, number):
    el = driver.find_element(By.CSS_SELECTOR, f'#ladder-svg [data-frame="{number}"] rect')
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", el)
    el.click()


def view_capture(driver, name, work, artifacts):
    cap = os.path.join(ROOT, "pcaps", name + ".pcap")
    html = os.path.join(work, name + ".html")
    roce("view", cap, "-o", html)
    analysis = json.loads(roce("analyze", "--json", cap).stdout)
    decoded = {d["frame"]: d for d in map(json.loads, roce("decode", "--json", cap).stdout.splitlines())}
    human = roce("decode", cap).stdout.splitlines()
    summaries = {int(l.split()[0][1:]): l for l in human if l.startswith("#")}
    driver.get("file://" + html)
    errors = console_errors(driver)
    check(f"{name}: no console errors on load", not errors, errors)
    # The first flow, as analyze numbers it.
    driver.find_element(By.CSS_SELECTOR, '[data-flow-row="0"]').click()
    flow0 = analysis["flows"][0]
    drawn = driver.find_elements(By.CSS_SELECTOR, '#ladder-svg [data-frame][data-flow="0"]')
    check(f"{name}: one data-frame element per packet of flow 0", len(drawn) == flow0["packets"],
          f"{len(drawn)} drawn, analyze says {flow0['packets']}")
    numbers = [int(e.get_attribute("data-frame")) for e in drawn]
    picks = sorted(set([numbers[0], numbers[len(numbers) // 2], numbers[-1]]))
    for n in picks:
        click_frame(driver, n)
        shown = frame_details(driver)
        want = flatten(decoded[n])
        check(f"{name}: frame {n} details carry decode --json's keys and values", shown == want,
              {k: (shown.get(k), want.get(k)) for k in set(shown) | set(want) if shown.get(k) != want.get(k)})
        summary = driver.find_element(By.CSS_SELECTOR, "#frame-details .summary").text
        check(f"{name}: frame {n} summary is decode's", summary.split() == summaries[n].split(),
              (summary, summaries[n]))
        names = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#frame-details td.name")]
        check(f"{name}: frame {n} explains BTH fields", {"OpCode", "DestQP", "PSN"} <= set(names), names)
    # The keyboard moves to the next frame drawn.
    click_frame(driver, picks[0])
    driver.find_element(By.ID, "ladder").send_keys(Keys.ARROW_DOWN)
    after = frame_details(driver)["frame"]
    # The ladder draws flow 0 and the flow that answers it, nothing else.
    pair = sorted(int(e.get_attribute("data-frame")) for e in driver.find_elements(
        By.CSS_SELECTOR, "#ladder-svg [data-frame]"))
    later = [x for x in pair if x > picks[0]]
    check(f"{name}: Down selects the next frame", not later or after == later[0], (after, later[:1]))
    # A field's bytes light up in the dump.
    field = driver.find_elements(By.CSS_SELECTOR, "#frame-details tr.field")[0]
    field.click()
    check(f"{name}: a field highlights its bytes",
          len(driver.find_elements(By.CSS_SELECTOR, "#frame-details .hex .hl")) > 0)
    # ... and a byte picks its field: byte 42 is the BTH's first (OpCode) after Ethernet, IPv4, UDP.
    if decoded[picks[0]].get("src", "").count(".") == 3:
        driver.find_element(By.CSS_SELECTOR, '#frame-details .hex [data-off="42"]').click()
        picked = driver.find_element(By.CSS_SELECTOR, "#frame-details tr.picked td.name").text
        check(f"{name}: byte 42 picks the BTH OpCode", picked == "OpCode", picked)
    errors = console_errors(driver)
    check(f"{name}: no console errors after clicks", not errors, errors)
    driver.save_screenshot(os.path.join(artifacts, name + ".png"))


def cm_exchange(driver, work, artifacts):
    """The rdma_cm exchange: each message links to its frame, whose details explain the MAD."""
    cap = os.path.join(ROOT, "pcaps", "rdma_cm_rping.pcap")
    html = os.path.join(work, "cm.html")
    roce("view", cap, "-o", html)
    decoded = {d["frame"]: d for d in map(json.loads, roce("decode", "--json", cap).stdout.splitlines())}
    driver.get("file://" + html)
    links = driver.find_elements(By.CSS_SELECTOR, "#cm a.goto")
    check("rdma_cm: each message of the exchange links to its frame", len(links) == 5, len(links))
    for link in links:
        n = int(link.get_attribute("data-goto"))
        link.click()
        shown = frame_details(driver)
        check(f"rdma_cm: frame {n} details carry decode --json's cm keys",
              shown == flatten(decoded[n]) and any(k.startswith("cm.") for k in shown),
              sorted(shown)[:8])
        names = [e.text for e in driver.find_elements(By.CSS_SELECTOR, "#frame-details td.name")]
        check(f"rdma_cm: frame {n} explains the CM message", "Communication ID" in " ".join(names)
              or any("Comm" in x for x in names), names[-8:])
    check("rdma_cm: no console errors", not console_errors(driver))
    driver.save_screenshot(os.path.join(artifacts, "rdma_cm.png"))


def pcap_records(path):
    """(header, [(ts_sec, ts_usec, data)]) of a little-endian microsecond pcap file."""
    raw = open(path, "rb").read()
    records, at = [], 24
    while at + 16 <= len(raw):
        sec, usec, incl, _orig = struct.unpack_from("<IIII", raw, at)
        records.append((sec, usec, raw[at + 16:at + 16 + incl]))
        at += 16 + incl
    return raw[:24], records


def pauses(driver, work, artifacts):
    """A PFC pause in force while frames fly is a band on the ladder's time axis."""
    header, records = pcap_records(os.path.join(ROOT, "pcaps", "rc_write.pcap"))
    sec, usec, first = records[0]
    # PFC (802.1Qbb): MAC control 0x8808, opcode 0x0101, priority 0 enabled, 0xffff quanta
    # (335.5 us at 100 Gb/s), padded to 60 bytes; sent 1 us after the first frame.
    pfc = (bytes.fromhex("0180c2000001") + first[6:12] + struct.pack(">HHH", 0x8808, 0x0101, 1)
           + struct.pack(">8H", 0xffff, *[0] * 7)).ljust(60, b"\0")
    out = [(sec, usec, first), (sec, usec + 1, pfc)] + records[1:]
    body = b"".join(struct.pack("<IIII", s_, u_, len(d), len(d)) + d for s_, u_, d in out)
    cap = os.path.join(work, "pfc.pcap")
    open(cap, "wb").write(header + body)
    html = os.path.join(work, "pfc.html")
    roce("view", cap, "-o", html)
    driver.get("file://" + html)
    bands = driver.find_elements(By.CSS_SELECTOR, '#ladder-svg .pause[data-pause-priority="0"]')
    check("PFC: the pause is drawn as a band on the ladder", len(bands) == 1, len(bands))
    check("PFC: the band names the pause", bands and "PFC pause of priority 0 by 52:54:00:77:00:0c"
          in driver.execute_script("return arguments[0].textContent", bands[0]))
    driver.find_element(By.ID, "goto").send_keys("2\n")
    summary = driver.find_element(By.CSS_SELECTOR, "#frame-details .summary").text
    check("PFC: the pause frame is shown with decode's summary", summary.startswith("#2 ")
          and "PFC from 52:54:00:77:00:0c: P0 XOFF" in summary, summary)
    check("PFC: no console errors", not console_errors(driver))
    driver.save_screenshot(os.path.join(artifacts, "pfc.png"))


def bad_input(driver, work, artifacts):
    whole = open(os.path.join(ROOT, "pcaps", "rc_loss_write.pcap"), "rb").read()
    cut = os.path.join(work, "cut.pcap")
    open(cut, "wb").write(whole[: len(whole) * 2 // 3])
    out = roce("view", cut, "-o", os.path.join(work, "cut.html"))
    check("cut capture: exit 2 (damaged)", out.returncode == 2, out.returncode)
    driver.get("file://" + os.path.join(work, "cut.html"))
    banner = driver.find_element(By.CSS_SELECTOR, ".banner.damage").text
    check("cut capture: a banner says where the damage is", "damaged capture at byte" in banner, banner)
    check("cut capture: the frames read are drawn",
          len(driver.find_elements(By.CSS_SELECTOR, "#ladder-svg [data-frame]")) > 0)
    check("cut capture: no console errors", not console_errors(driver))
    driver.save_screenshot(os.path.join(artifacts, "cut.png"))

    header_only = os.path.join(work, "empty.pcap")
    open(header_only, "wb").write(whole[:24])
    roce("view", header_only, "-o", os.path.join(work, "empty.html"))
    driver.get("file://" + os.path.join(work, "empty.html"))
    text = driver.find_element(By.TAG_NAME, "body").text
    check("empty capture: the page says so", "no frames" in text, text[:200])
    check("empty capture: no console errors", not console_errors(driver))

    nasty = os.path.join(work, "<img src=x onerror=alert(1)>.pcap")
    shutil.copy(os.path.join(ROOT, "pcaps", "ud_send.pcap"), nasty)
    roce("view", nasty, "-o", os.path.join(work, "nasty.html"))
    driver.get("file://" + os.path.join(work, "nasty.html"))
    title = driver.find_element(By.CSS_SELECTOR, "h1 .file").text
    check("HTML in a name is shown as text", title == os.path.basename(nasty), title)
    check("HTML in a name makes no element", not driver.find_elements(By.CSS_SELECTOR, "h1 img"))
    check("HTML in a name: no console errors", not console_errors(driver))


def lessons(driver, work, artifacts):
    """`roce gen LESSON --view` writes the lesson's view beside it, showing the lesson's point."""
    # (lesson, the ladder rows that show its point, how many, a word its comment has);
    # retry-exceeded: the WRITE's 3 packets, then 7 sent again (a tail probe, then the first
    # packet alone, twice per local ACK timeout, as nothing answers).
    for lesson, css, count, word in [("loss-gbn", ".row.k-nak", 1, "PSN_SEQUENCE_ERROR"),
                                     ("nak-access", ".row.k-nak", 1, "REMOTE_ACCESS_ERROR"),
                                     ("nak-invalid", ".row.k-nak", 1, "INVALID_REQUEST"),
                                     ("rnr", ".row.k-rnr", 1, "RNR NAK"),
                                     ("retry-exceeded", ".row.k-retx", 7, "retransmission")]:
        out = roce("gen", lesson, "-o", os.path.join(work, lesson + ".pcapng"), "--view")
        html = os.path.join(work, lesson + ".html")
        check(f"gen {lesson} --view writes the page beside the capture", os.path.exists(html),
              out.stdout + out.stderr)
        if not os.path.exists(html):
            continue
        driver.get("file://" + html)
        check(f"gen {lesson} --view: no console errors", not console_errors(driver))
        rows = driver.find_elements(By.CSS_SELECTOR, "#ladder-svg " + css)
        check(f"gen {lesson} --view: {count} rows {css}", len(rows) == count, len(rows))
        if rows:
            rows[-1].find_element(By.TAG_NAME, "rect").click()
            comment = driver.find_elements(By.CSS_SELECTOR, "#frame-details .comment")
            check(f"gen {lesson} --view: the frame's comment is shown",
                  comment and word in comment[0].text, comment and comment[0].text)
        driver.save_screenshot(os.path.join(artifacts, f"lesson-{lesson}.png"))
    # The PFC lesson: the pause is one band across the ladder; the XOFF frame (5) says why.
    roce("gen", "pfc", "-o", os.path.join(work, "pfc-lesson.pcapng"), "--view")
    driver.get("file://" + os.path.join(work, "pfc-lesson.html"))
    bands = driver.find_elements(By.CSS_SELECTOR, '#ladder-svg .pause[data-pause-priority="0"]')
    check("gen pfc --view: the pause is one band on the ladder", len(bands) == 1, len(bands))
    # XOFF and XON are arrows of the exchange, from B's end (the right) to A's.
    arrows = driver.find_elements(By.CSS_SELECTOR, "#ladder-svg .row.k-pause")
    check("gen pfc --view: XOFF and XON drawn in the ladder", [a.get_attribute("data-frame")
          for a in arrows] == ["5", "8"], [a.get_attribute("data-frame") for a in arrows])
    lines = [a.find_element(By.CSS_SELECTOR, "line.arrow") for a in arrows]
    check("gen pfc --view: the pause arrows go from B to A", lines and all(
          float(x.get_attribute("x1")) > float(x.get_attribute("x2")) for x in lines))
    driver.find_element(By.ID, "goto").send_keys("5\n")
    comment = driver.find_elements(By.CSS_SELECTOR, "#frame-details .comment")
    check("gen pfc --view: the XOFF frame's comment is shown",
          comment and "PFC XOFF" in comment[0].text, comment and comment[0].text)
    check("gen pfc --view: no console errors", not console_errors(driver))
    driver.save_screenshot(os.path.join(artifacts, "lesson-pfc.png"))
    # The rdma_cm lessons: their views show the CM exchange, each message linked to its frame.
    names = [line.split()[0] for line in roce("gen", "--list").stdout.splitlines() if line.strip()]
    cm_lessons = [n for n in names if n.startswith("cm-")]
    print(f"rdma_cm lessons: {', '.join(cm_lessons) or 'none listed by roce gen --list yet'}")
    for lesson in cm_lessons:
        roce("gen", lesson, "-o", os.path.join(work, lesson + ".pcapng"), "--view")
        driver.get("file://" + os.path.join(work, lesson + ".html"))
        links = driver.find_elements(By.CSS_SELECTOR, "#cm a.goto")
        check(f"gen {lesson} --view: the rdma_cm exchange is shown", len(links) >= 1, len(links))
        if links:
            links[0].click()
            check(f"gen {lesson} --view: a CM message's frame shows its cm keys",
                  any(k.startswith("cm.") for k in frame_details(driver)))
        check(f"gen {lesson} --view: no console errors", not console_errors(driver))
        driver.save_screenshot(os.path.join(artifacts, f"lesson-{lesson}.png"))


def main():
    global ROCE
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    ROCE = os.path.abspath(sys.argv[1])
    artifacts = os.environ.get("ROCE_ARTIFACTS", os.path.join(ROOT, "target", "browser-artifacts"))
    os.makedirs(artifacts, exist_ok=True)
    work = tempfile.mkdtemp(prefix="roce-view-test-")
    driver, profile = browser()
    try:
        for name in CAPTURES:
            view_capture(driver, name, work, artifacts)
        cm_exchange(driver, work, artifacts)
        pauses(driver, work, artifacts)
        bad_input(driver, work, artifacts)
        lessons(driver, work, artifacts)
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(f"screenshots in {artifacts}")
    print(f"view_needs_browser: {len(PASSED)} passed, {len(FAILED)} failed")
    sys.exit(1 if FAILED else 0)


ROCE = None
if __name__ == "__main__":
    main()
