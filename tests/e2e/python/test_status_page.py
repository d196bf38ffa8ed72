"""The status page in headless Chromium (selenium, chromedriver): it signs in through its
form, shows the primary's breaker opening after a dead primary is hit and closing after it
heals, saves a screenshot of each, and has its labels and readable contrast (WCAG AA, 4.5:1).

Needs GATEWAY_URL, GATEWAY_KEY, MOCK_URL and SCREENSHOT_DIR in the environment;
CHROMEDRIVER and CHROMIUM name the binaries (default /usr/bin/chromedriver, /usr/bin/chromium).
"""

import json
import os
import re
import time
import unittest
import urllib.request

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.common.exceptions import StaleElementReferenceException
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ec
from selenium.webdriver.support.ui import WebDriverWait

GATEWAY_URL = os.environ["GATEWAY_URL"]
GATEWAY_KEY = os.environ["GATEWAY_KEY"]
MOCK_URL = os.environ["MOCK_URL"]
SHOTS = os.environ["SCREENSHOT_DIR"]

# The WCAG relative luminance and contrast ratio of two computed CSS colours, in the page.
CONTRAST_JS = """
function rgb(s){const m=s.match(/[0-9.]+/g).map(Number);return m.slice(0,3);}
function lum(c){const v=c.map(x=>{x/=255;return x<=0.03928?x/12.92:Math.pow((x+0.055)/1.055,2.4);});
  return 0.2126*v[0]+0.7152*v[1]+0.0722*v[2];}
function bg(el){for(;el;el=el.parentElement){const b=getComputedStyle(el).backgroundColor;
  if(!/rgba\\(0, 0, 0, 0\\)|transparent/.test(b))return b;}return "rgb(255,255,255)";}
const out=[];
for(const el of document.querySelectorAll(arguments[0])){
  const a=lum(rgb(getComputedStyle(el).color)),b=lum(rgb(bg(el)));
  out.push([el.textContent.trim(),(Math.max(a,b)+0.05)/(Math.min(a,b)+0.05)]);}
return out;
"""


def post(url, body, headers=None):
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"content-type": "application/json", **(headers or {})})
    with urllib.request.urlopen(req, timeout=20) as res:
        return res.status


def chat():
    return post(f"{GATEWAY_URL}/v1/chat/completions",
                {"model": "default", "messages": [{"role": "user", "content": "hi"}]},
                {"authorization": f"Bearer {GATEWAY_KEY}"})


class StatusPage(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        opts = webdriver.ChromeOptions()
        opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--window-size=1280,900"]:
            opts.add_argument(a)
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        cls.driver = webdriver.Chrome(service=service, options=opts)
        cls.driver.set_page_load_timeout(20)

    @classmethod
    def tearDownClass(cls):
        cls.driver.quit()

    def state_of(self, provider, model=None):
        row = f'tr.model[data-provider="{provider}"][data-model="{model}"]' if model else f'tr[data-provider="{provider}"]'
        cells = self.driver.find_elements(By.CSS_SELECTOR, f'{row} .state .label')
        try:
            return cells[0].text if cells else None
        except StaleElementReferenceException:
            return None  # the page re-rendered its table between the find and the read

    def pool_of(self, provider, model):
        cells = self.driver.find_elements(
            By.CSS_SELECTOR, f'tr.model[data-provider="{provider}"][data-model="{model}"] td:last-child')
        try:
            return cells[0].text if cells else ""
        except StaleElementReferenceException:
            return ""  # re-rendered between the find and the read

    def wait_state(self, provider, state, seconds=15):
        WebDriverWait(self.driver, seconds, poll_frequency=0.2).until(
            lambda d: self.state_of(provider) == state,
            f"{provider} did not show {state} (shows {self.state_of(provider)})")

    def test_signs_in_and_shows_the_breaker_open_then_closed(self):
        try:
            self.check_page()
        except Exception:
            self.driver.save_screenshot(os.path.join(SHOTS, "status-failure.png"))
            raise

    def check_page(self):
        d = self.driver
        d.get(f"{GATEWAY_URL}/status")
        self.assertEqual(d.find_element(By.CSS_SELECTOR, 'label[for="key"]').text, "Gateway key")
        self.assertNotIn(GATEWAY_KEY, d.current_url)
        d.find_element(By.ID, "key").send_keys(GATEWAY_KEY)
        d.find_element(By.CSS_SELECTOR, "button[type=submit]").click()
        WebDriverWait(d, 10).until(ec.presence_of_element_located((By.ID, "providers")))
        self.assertEqual(d.current_url.rstrip("/"), f"{GATEWAY_URL}/status", "no key in the URL")
        self.assertNotIn(GATEWAY_KEY, d.page_source)
        self.assertEqual(self.state_of("primary"), "closed")
        heads = [th.text for th in d.find_elements(By.CSS_SELECTOR, "th")]
        for label in ["Provider", "Breaker", "Next probe", "Error rate", "Latency p50 / p95 / p99",
                      "Time to first token p50 / p95", "Rate-limit pool", "When", "What"]:
            self.assertIn(label, heads)

        # The primary dies: one request opens its breaker (threshold 1) and fails over.
        post(f"{MOCK_URL}/admin/primary/fault", {"mode": "status", "status": 503})
        self.assertEqual(chat(), 200)
        self.wait_state("primary", "open")  # the page refreshes itself; no reload
        self.assertEqual(self.state_of("primary", "m"), "open", "the model's own breaker, in its row")
        # The backup answered with its rate-limit headers (its pool at the mock: 1000 requests):
        # its model row shows what is left, as the page's script renders it.
        WebDriverWait(d, 15, poll_frequency=0.2).until(
            lambda d: re.match(r"^requests 999 / 1000 · full in \d+\.\d s$", self.pool_of("backup", "m")),
            "the backup's rate-limit pool is not shown")
        # The transition as the fleet's breaker object logged it (every isolate's), and the
        # object's totals: they reach the page at its next refresh after the verdict's report.
        WebDriverWait(d, 15, poll_frequency=0.2).until(
            lambda d: "fleet breaker of primary/m: closed → open" in d.find_element(By.ID, "changes").text,
            "the fleet's transition is not listed")
        row = '#fleet-rows tr[data-provider="primary"][data-model="m"]'
        WebDriverWait(d, 15, poll_frequency=0.2).until(
            lambda d: re.match(r"^primary m \d+ 1 0 1$", " ".join(
                c.text for c in d.find_elements(By.CSS_SELECTOR, f"{row} td"))),
            "the fleet row is not: answered, 1 failed, 0 probes, 1 transition")
        self.assertEqual(d.find_element(By.ID, "overall").text, "degraded")
        d.save_screenshot(os.path.join(SHOTS, "status-open.png"))

        # Healed: after the cooldown the next request's probe closes it.
        post(f"{MOCK_URL}/admin/primary/reset", {})
        time.sleep(2.2)  # the configured 2 s cooldown, in real time
        self.assertEqual(chat(), 200)
        self.wait_state("primary", "closed")
        self.assertEqual(d.find_element(By.ID, "overall").text, "ok")
        d.save_screenshot(os.path.join(SHOTS, "status-closed.png"))

        for text, ratio in d.execute_script(CONTRAST_JS, "th, td, h1, h2, .state, .pill, header span"):
            self.assertGreaterEqual(ratio, 4.5, f"contrast of {text!r}: {ratio:.2f}")


if __name__ == "__main__":
    unittest.main()
