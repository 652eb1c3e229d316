"""The web viewer in a real headless Chromium, driven over WebDriver (Debian's `chromium` and
`chromium-driver`, Python's selenium).

Starts the real nmemd in a temporary NMEM_HOME, records an observation with the real
`nmem record`, opens the page through the URL `nmem ui` prints, and checks: the observation is in
Live; one recorded after the page opened arrives by the event stream (deadline-based wait, the
delay printed); a search finds it and says why; its timeline opens; pinning it pins it in the
database. A screenshot of each view is saved under target/viewer-screenshots/ for review.
Prints `browser: N passed, M failed`; exits 1 on any failure. Run by scripts/test.

`--measure HOME` instead opens the viewer on an existing memory (a copy: nmemd migrates it) and
prints the first paint and search times there, e.g. at 1M observations (see ARCHITECTURE.md).
"""

import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By

BIN = Path(os.environ["NMEM_BIN_DIR"])  # set by scripts/env.sh
ROOT = Path(__file__).resolve().parents[2]
SHOTS = ROOT / "target" / "viewer-screenshots"
RESULTS = {"passed": 0, "failed": 0}


def check(name, cond, detail=""):
    if cond:
        RESULTS["passed"] += 1
    else:
        RESULTS["failed"] += 1
        print(f"FAIL {name}: {detail}", file=sys.stderr)


def wait_for(what, cond, timeout=15.0):
    """Poll `cond` until it returns something truthy, or fail after `timeout` seconds."""
    start = time.monotonic()
    while True:
        try:
            got = cond()
        except Exception:  # the element is not there yet, or went stale
            got = None
        if got:
            return got
        if time.monotonic() - start > timeout:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.05)


def bash_event(session, n, command):
    return json.dumps({
        "session_id": session,
        "cwd": "/home/dev/projects/shop",
        "hook_event_name": "PostToolUse",
        "tool_name": "Bash",
        "tool_input": {"command": command, "description": "run"},
        "tool_response": {"stdout": f"{command}: ok\n", "stderr": "", "interrupted": False},
        "tool_use_id": f"toolu_browser_{session}_{n}",
    }).encode()


def chrome(profile):
    opts = webdriver.ChromeOptions()
    opts.binary_location = shutil.which("chromium") or "/usr/bin/chromium"
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--window-size=1400,900", f"--user-data-dir={profile}"]:
        opts.add_argument(a)
    service = Service(shutil.which("chromedriver") or "/usr/bin/chromedriver")
    return webdriver.Chrome(options=opts, service=service)


def measure(home):
    """First paint and search times on the memory in `home` (figures printed, not asserted)."""
    home = Path(home).resolve()
    env = {**os.environ, "NMEM_HOME": str(home), "NMEM_NO_AUTOSTART": "1"}
    env.pop("NMEM_DB", None)
    env.pop("NMEM_SOCKET", None)
    log = open(home / "nmemd-measure.log", "wb")
    daemon = subprocess.Popen([BIN / "nmemd"], env=env, stdout=log, stderr=log)
    profile = Path(tempfile.mkdtemp(prefix="nmem-chromium-"))
    driver = None
    try:
        wait_for("nmemd", lambda: subprocess.run([BIN / "nmemctl", "status"], env=env,
                                                 capture_output=True).returncode == 0, 300)
        url = subprocess.run([BIN / "nmem", "ui"], env=env, capture_output=True, text=True,
                             timeout=60, check=True).stdout.strip()
        n = subprocess.run([BIN / "nmemctl", "status", "--json"], env=env, capture_output=True,
                           text=True).stdout
        print(f"measure: {json.loads(n)['observations']} observations")
        driver = chrome(profile)
        for run in range(3):
            t0 = time.monotonic()
            driver.get(url if run == 0 else url.split("?")[0])
            wait_for("the first Live row", lambda: driver.find_elements(By.CSS_SELECTOR, "#live-list li"), 60)
            ms = 1000 * (time.monotonic() - t0)
            fcp = driver.execute_script(
                "const e = performance.getEntriesByName('first-contentful-paint'); return e.length ? e[0].startTime : null")
            print(f"measure: page load {run + 1}: first Live row {ms:.0f} ms after navigation "
                  f"(first contentful paint {fcp:.0f} ms)" if fcp else f"measure: first Live row {ms:.0f} ms")
        driver.find_element(By.ID, "tab-search").click()
        for q in ["cargo test", "connection refused", "migration", "retry backoff timeout"]:
            box = driver.find_element(By.ID, "q")
            box.clear()
            box.send_keys(q)
            driver.execute_script("document.getElementById('search-results').replaceChildren(); document.getElementById('search-notes').textContent = ''")
            t0 = time.monotonic()
            driver.find_element(By.ID, "search-go").click()
            wait_for("results", lambda: driver.find_elements(By.CSS_SELECTOR, "#search-results li")
                     or "search" in driver.find_element(By.ID, "search-notes").text, 60)
            ms = 1000 * (time.monotonic() - t0)
            k = len(driver.find_elements(By.CSS_SELECTOR, "#search-results li"))
            print(f"measure: search {q!r}: {k} results shown {ms:.0f} ms after submitting")
        driver.save_screenshot(str(SHOTS / "search-1m.png"))
    finally:
        if driver is not None:
            driver.quit()
        daemon.terminate()
        daemon.wait(timeout=30)
        shutil.rmtree(profile, ignore_errors=True)
    return 0


def main():
    home = Path(tempfile.mkdtemp(prefix="nmem-browser-"))
    env = {**os.environ, "NMEM_HOME": str(home), "NMEM_NO_AUTOSTART": "1"}
    env.pop("NMEM_DB", None)
    env.pop("NMEM_SOCKET", None)
    (home / "config.toml").write_text("[http]\nport = 0\n")
    log = open(home / "nmemd.log", "wb")
    daemon = subprocess.Popen([BIN / "nmemd"], env=env, stdout=log, stderr=log)
    driver = None
    try:
        wait_for("nmemd's socket", lambda: (home / "nmemd.sock").exists(), 20)

        def record(n, command):
            subprocess.run([BIN / "nmem", "record"], input=bash_event("web", n, command),
                           env=env, check=True, capture_output=True, timeout=30)

        record(1, "pytest tests/test_checkout.py")
        out = subprocess.run([BIN / "nmem", "ui"], env=env, capture_output=True, text=True,
                             timeout=30, check=True)
        url = out.stdout.strip()
        check("nmem ui prints the URL", url.startswith("http://127.0.0.1:") and "?token=" in url, url)

        driver = chrome(home / "chromium")
        SHOTS.mkdir(parents=True, exist_ok=True)

        # First paint: the time to the first Live row, measured from navigation.
        t0 = time.monotonic()
        driver.get(url)
        check("the token leaves the address bar", "token=" not in driver.current_url, driver.current_url)
        first = wait_for("the recorded observation in Live", lambda: [
            li for li in driver.find_elements(By.CSS_SELECTOR, "#live-list li")
            if "pytest tests/test_checkout.py" in li.text])
        print(f"browser: first Live row painted {1000 * (time.monotonic() - t0):.0f} ms after navigation")
        check("Live shows the recorded observation", bool(first))
        wait_for("the event stream", lambda: "live" in driver.find_element(By.ID, "stream-state").text)

        # Recorded now: arrives by the event stream.
        t1 = time.monotonic()
        record(2, "cargo build --release -p billing")
        wait_for("the new observation by SSE", lambda: [
            li for li in driver.find_elements(By.CSS_SELECTOR, "#live-list li")
            if "cargo build --release -p billing" in li.text], 10)
        print(f"browser: observation.stored shown {1000 * (time.monotonic() - t1):.0f} ms after `nmem record` started")
        check("Live receives a new observation", True)
        driver.save_screenshot(str(SHOTS / "live.png"))

        # Search.
        driver.find_element(By.ID, "tab-search").click()
        q = driver.find_element(By.ID, "q")
        q.send_keys("billing")
        t2 = time.monotonic()
        driver.find_element(By.ID, "search-go").click()
        hit = wait_for("a search result", lambda: driver.find_elements(By.CSS_SELECTOR, "#search-results li"))
        print(f"browser: search results shown {1000 * (time.monotonic() - t2):.0f} ms after submitting")
        check("search finds the observation", "cargo build --release -p billing" in hit[0].text, hit[0].text)
        check("search says why it matched", "why:" in hit[0].text, hit[0].text)
        driver.save_screenshot(str(SHOTS / "search.png"))

        # Its record and timeline.
        hit[0].click()
        wait_for("the timeline", lambda: driver.find_elements(By.CSS_SELECTOR, "#timeline li.anchor"))
        rows = driver.find_elements(By.CSS_SELECTOR, "#timeline li")
        check("the timeline shows the session around it", len(rows) >= 2, len(rows))
        obs_id = int(driver.find_element(By.CSS_SELECTOR, "#timeline li.anchor").get_attribute("data-id"))

        # Pin it.
        driver.find_element(By.ID, "pin-btn").click()
        wait_for("the pinned state", lambda: driver.find_element(By.ID, "pin-state").text == "pinned")
        db = sqlite3.connect(f"file:{home / 'nmem.db'}?mode=ro", uri=True)
        pinned = db.execute("SELECT is_pinned FROM observations WHERE id = ?", (obs_id,)).fetchone()[0]
        db.close()
        check("pinning pins it in the database", pinned == 1, pinned)
        driver.save_screenshot(str(SHOTS / "timeline-pinned.png"))

        # The other views render.
        driver.find_element(By.ID, "tab-sessions").click()
        wait_for("a session row", lambda: driver.find_elements(By.CSS_SELECTOR, "#sessions-table tbody tr"))
        check("Sessions lists the session", True)
        driver.save_screenshot(str(SHOTS / "sessions.png"))
        driver.find_element(By.ID, "tab-health").click()
        wait_for("health cards", lambda: len(driver.find_elements(By.CSS_SELECTOR, "#health-grid .card")) > 5)
        wait_for("the trends chart", lambda: driver.find_elements(By.CSS_SELECTOR, "#chart svg rect"))
        wait_for("the queue depth's line", lambda: driver.find_elements(By.CSS_SELECTOR, "#chart svg polyline.depth"))
        check("Health shows status and the chart", True)
        driver.save_screenshot(str(SHOTS / "health.png"))
        driver.find_element(By.ID, "tab-actions").click()
        driver.find_element(By.ID, "purge-project").send_keys("shop")
        driver.find_element(By.ID, "purge-dry").click()
        wait_for("the dry-run count", lambda: "would be deleted" in driver.find_element(By.ID, "purge-result").text)
        check("purge shows its dry-run count first",
              driver.find_element(By.ID, "purge-result").text.startswith("2 rows"),
              driver.find_element(By.ID, "purge-result").text)
        driver.save_screenshot(str(SHOTS / "actions.png"))
        errors = [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
        check("no errors in the browser console", not errors, errors)
    except Exception as e:  # a failed wait: report it, keep the screenshot
        check("browser flow", False, repr(e))
        if driver is not None:
            SHOTS.mkdir(parents=True, exist_ok=True)
            driver.save_screenshot(str(SHOTS / "failure.png"))
            print(f"the page at failure: {SHOTS / 'failure.png'}; nmemd's log: {home / 'nmemd.log'}",
                  file=sys.stderr)
    finally:
        if driver is not None:
            driver.quit()
        daemon.terminate()
        try:
            daemon.wait(timeout=20)
        except subprocess.TimeoutExpired:
            daemon.kill()
        if RESULTS["failed"] == 0:
            shutil.rmtree(home, ignore_errors=True)
    print(f"browser: {RESULTS['passed']} passed, {RESULTS['failed']} failed; screenshots in {SHOTS}")
    return 1 if RESULTS["failed"] else 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--measure":
        SHOTS.mkdir(parents=True, exist_ok=True)
        sys.exit(measure(sys.argv[2]))
    sys.exit(main())
