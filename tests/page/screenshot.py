#!/usr/bin/env python3
"""Takes the README's screenshot of the live page while scripts/demo.sh runs (the demo forwards
the page to this machine): waits until the page lists the background stepping back, then until
the demo's downloads have run together for `SETTLE` seconds, and saves a full-page screenshot.

Usage: /usr/bin/python3 tests/page/screenshot.py http://127.0.0.1:9617/ docs/img/live-page-demo.png [WIDTH] [SETTLE]
"""

import sys
import time

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

url, out = sys.argv[1], sys.argv[2]
width = int(sys.argv[3]) if len(sys.argv) > 3 else 1280
settle = float(sys.argv[4]) if len(sys.argv) > 4 else 10
options = webdriver.ChromeOptions()
for arg in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--hide-scrollbars"]:
    options.add_argument(arg)
driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
try:
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": width < 600})
    deadline = time.time() + 600
    while time.time() < deadline:
        try:
            driver.get(url)
            break
        except Exception:
            time.sleep(2)
    while time.time() < deadline and not driver.find_elements(By.CSS_SELECTOR, "#yields li[data-kind=stepped_back]"):
        time.sleep(1)
    time.sleep(settle)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride",
                           {"width": width, "height": min(height, 4000), "deviceScaleFactor": 1, "mobile": width < 600})
    time.sleep(0.5)
    driver.save_screenshot(out)
    print(f"saved {out}")
finally:
    driver.quit()
