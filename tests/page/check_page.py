#!/usr/bin/env python3
"""Drives the live page with Debian's chromium and chromium-driver (selenium) and checks what it
shows against the daemon's own JSON (/api/...) and /metrics, read at the same time. Run by
tests/page.rs inside the testbed's router namespace, under a background and a best-effort
download; prints one JSON object with what it saw and exits 1 if a check failed.

Usage: check_page.py BASE_URL LAN_ADDRESS LEASE_NAME RULE OUT_DIR
"""

import json
import sys
import time
import urllib.error
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

BASE, LAN_ADDRESS, LEASE_NAME, RULE, OUT_DIR = sys.argv[1:6]
failures = []
facts = []
seen = {}


def get(path):
    with urllib.request.urlopen(BASE + path, timeout=5) as r:
        return r.read().decode()


def api(path):
    return json.loads(get(path))


def metric(name, labels=None):
    """The first sample of `name` whose labels include `labels`."""
    for line in get("/metrics").splitlines():
        if line.startswith("#") or not line.startswith(name):
            continue
        rest = line[len(name):]
        if rest.startswith("{"):
            lab, value = rest[1:].rsplit("}", 1)
        elif rest.startswith(" "):
            lab, value = "", rest
        else:
            continue
        if all(f'{k}="{v}"' in lab for k, v in (labels or {}).items()):
            return float(value.split()[0])
    return None


def check(name, ok, detail):
    facts.append({"fact": name, "ok": bool(ok), "detail": detail})
    if not ok:
        failures.append(f"{name}: {detail}")


def wait_for(what, predicate, timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            value = predicate()
            if value:
                return value
        except Exception:  # the page is still rendering; try again
            pass
        time.sleep(0.25)
    failures.append(f"timed out after {timeout} s waiting for {what}")
    return None


def viewport(driver, width, height, mobile):
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": mobile})


def layout(driver, width):
    """Lays the page out at `width`: nothing wider than the viewport; a full-page screenshot."""
    viewport(driver, width, 900, width < 600)
    time.sleep(0.5)
    dims = driver.execute_script(
        "return [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth,"
        " document.documentElement.scrollHeight]")
    check(f"layout at {width} px: no horizontal overflow", dims[0] <= dims[2] and dims[1] <= dims[2],
          f"scrollWidth {dims[0]}/{dims[1]}, innerWidth {dims[2]}")
    viewport(driver, width, min(dims[3], 4000), width < 600)
    time.sleep(0.5)
    path = f"{OUT_DIR}/live-page-{width}.png"
    driver.save_screenshot(path)
    seen[f"screenshot_{width}"] = path
    viewport(driver, width, 900, width < 600)


def text(driver, css):
    return driver.find_element(By.CSS_SELECTOR, css).text


def attr(driver, css, name):
    return driver.find_element(By.CSS_SELECTOR, css).get_attribute(name)


def main():
    options = webdriver.ChromeOptions()
    for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--disable-extensions", f"--user-data-dir={OUT_DIR}/chromium-profile"]:
        options.add_argument(arg)
    options.binary_location = "/usr/bin/chromium"
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    try:
        viewport(driver, 1280, 900, False)
        t0 = time.time()
        driver.get(BASE + "/")
        wait_for("the first update", lambda: int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-updates") or 0) >= 1, 15)
        seen["first_update_s"] = round(time.time() - t0, 2)

        # The yield: best effort arrives beside the background download and the background steps
        # back; the page lists both (this is what the README's screenshot shows).
        wait_for("a yield on the page", lambda: driver.find_elements(By.CSS_SELECTOR, "#yields li[data-kind=stepped_back]"), 40)
        arrived = driver.find_elements(By.CSS_SELECTOR, "#yields li[data-kind=arrived]")
        stepped = driver.find_elements(By.CSS_SELECTOR, "#yields li[data-kind=stepped_back]")
        history = api("/api/history")
        kinds = [y["kind"] for y in history["yields"]]
        check("yields shown as the daemon found them",
              len(arrived) == kinds.count("best_effort_arrived") and len(stepped) == kinds.count("background_stepped_back") and stepped,
              f"page: {len(arrived)} arrived, {len(stepped)} stepped back; /api/history: {kinds}")
        seen["yields"] = [li.text for li in stepped + arrived]

        # 1. The engine.
        status = api("/api/status")
        check("engine", text(driver, "#engine") == status["datapath"] and status["datapath"] in ("nfqueue", "ebpf"),
              f"page {text(driver, '#engine')!r}, /api/status {status['datapath']!r}")
        check("version", text(driver, "#version") == status["version"], f"page {text(driver, '#version')!r}, /api/status {status['version']!r}")

        # 2. The flow count, against /api/status and /metrics (retried: a flow may come or go
        # between the reads).
        for attempt in range(8):
            shown = int(text(driver, "#flows-active"))
            m = metric("slipstream_flows_active")
            s = api("/api/status")["flows_active"]
            if shown == m == s:
                break
            time.sleep(0.5)
        check("flow count", shown == m == s and shown >= 2, f"page {shown}, /api/status {s}, /metrics {m}")

        # 3. The LAN host: its address, its lease name, a background and a best-effort rate.
        row = wait_for("the LAN host's row with both rates", lambda: [
            r for r in driver.find_elements(By.CSS_SELECTOR, f'#hosts tr[data-address="{LAN_ADDRESS}"]')
            if float(r.find_elements(By.CSS_SELECTOR, "td")[1].get_attribute("data-v") or 0) > 0
            and float(r.find_elements(By.CSS_SELECTOR, "td")[2].get_attribute("data-v") or 0) > 0], 15)
        if row:
            cells = row[0].find_elements(By.CSS_SELECTOR, "td")
            name = row[0].find_element(By.CSS_SELECTOR, "[data-field=name]").text
            bg, be = float(cells[1].get_attribute("data-v")), float(cells[2].get_attribute("data-v"))
            hosts = api("/api/hosts")
            mine = [h for h in hosts["hosts"] if h["address"] == LAN_ADDRESS]
            check("LAN host name and address", name == LEASE_NAME and mine and mine[0]["name"] == LEASE_NAME,
                  f"page {name!r} at {LAN_ADDRESS}, /api/hosts {mine}")
            check("LAN host rates", bg > 0 and be > 0 and hosts["best_effort_counted"],
                  f"page background {bg:.0f} bit/s, best effort {be:.0f} bit/s; /api/hosts {mine}")
            seen["host"] = {"name": name, "background_bps": bg, "best_effort_bps": be}

        # 4. The rule's bytes today, between /metrics read before and after.
        before = metric("slipstream_rule_acked_bytes_total", {"rule": RULE})
        shown = float(attr(driver, f'#rules tr[data-rule="{RULE}"] [data-field=bytes_today]', "data-v"))
        after = metric("slipstream_rule_acked_bytes_total", {"rule": RULE})
        # The page's figure is at most a sample (1 s) and a poll (2 s) older than `before`:
        # 3 s of the whole 10 Mbit/s link at most.
        check("rule bytes today", before is not None and before - 3 * 10e6 / 8 <= shown <= after and shown > 0,
              f"page {shown:.0f}, /metrics {before} .. {after}")
        seen["rule_bytes_today"] = shown

        # 5. The link's budget and background rate: the numbers of the sample the card shows,
        # found in /api/history by its time.
        card = driver.find_element(By.CSS_SELECTOR, 'section.linkcard[data-link="download"]')
        t = int(card.get_attribute("data-t"))
        budget = float(card.find_element(By.CSS_SELECTOR, "[data-field=budget_bytes]").get_attribute("data-v"))
        background = float(card.find_element(By.CSS_SELECTOR, "[data-field=background_bps]").get_attribute("data-v"))
        sample = [s for s in api("/api/history")["samples"] if s["t_unix_ms"] == t]
        link = [l for l in sample[0]["links"] if l["link"] == "download"] if sample else []
        check("link budget and background rate", link and link[0]["budget_bytes"] == budget and link[0]["background_bps"] == background,
              f"page budget {budget:.0f} B, background {background:.0f} bit/s at {t}; /api/history {link}")
        # The queue target the card names is its sample's, and the one /metrics gives (the
        # background alone here: the configured target).
        shown_target = card.find_elements(By.CSS_SELECTOR, "[data-field=queue_target_ms]")
        shown_target = float(shown_target[0].get_attribute("data-v")) if shown_target else None
        metrics_target = metric("slipstream_household_queue_target_seconds", {"link": "download"})
        check("queue target shown", link and shown_target is not None and link[0].get("queue_target_ms") == shown_target
              and metrics_target is not None and metrics_target > 0,
              f"page {shown_target} ms, /api/history {link[0].get('queue_target_ms') if link else None}, /metrics now {metrics_target} s")
        metrics_budget = metric("slipstream_household_budget_bytes", {"link": "download"})
        check("a budget /metrics knows", metrics_budget is not None and budget > 0, f"page {budget}, /metrics now {metrics_budget}")

        # 6. The busiest flows: the rule's flow with its goodput.
        flows = driver.find_elements(By.CSS_SELECTOR, "#flows tbody tr[data-lan]")
        check("busiest flows listed", any(RULE in f.text for f in flows), f"{len(flows)} rows: {[f.text for f in flows][:4]}")

        # An update: the page's counter and clock move, the card's sample is newer.
        updates = int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-updates"))
        clock = text(driver, "#updated")
        moved = wait_for("an update", lambda: int(driver.find_element(By.TAG_NAME, "body").get_attribute("data-updates")) > updates
                         and text(driver, "#updated") != clock, 6)
        t2 = int(driver.find_element(By.CSS_SELECTOR, 'section.linkcard[data-link="download"]').get_attribute("data-t"))
        check("the page updates", moved and t2 > t, f"updates {updates} -> {driver.find_element(By.TAG_NAME, 'body').get_attribute('data-updates')}, sample {t} -> {t2}")

        layout(driver, 1280)
        layout(driver, 375)

        # Read-only: anything but GET and HEAD is refused.
        codes = []
        for method in ("POST", "PUT", "DELETE"):
            try:
                urllib.request.urlopen(urllib.request.Request(BASE + "/api/status", data=b"x", method=method), timeout=5)
                codes.append(200)
            except urllib.error.HTTPError as e:
                codes.append(e.code)
        check("read-only", codes == [405, 405, 405], f"POST, PUT, DELETE /api/status: {codes}")

        logs = driver.get_log("browser")
        errors = [e for e in logs if e.get("level") == "SEVERE"]
        check("no console errors", not errors, f"{len(logs)} console entries, errors: {errors}")
        seen["page_bytes"] = len(get("/"))
    finally:
        driver.quit()


try:
    main()
except Exception as e:  # a selenium failure is a failed check, with its message
    failures.append(f"{type(e).__name__}: {e}")
print(json.dumps({"facts": facts, "seen": seen, "failures": failures}, indent=1))
sys.exit(1 if failures else 0)
