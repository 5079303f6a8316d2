"""A real browser (Debian's chromium via Selenium) against `streamlit run` on a free localhost port.

Waits on the app's own state (``data-test-script-state`` on the ``stApp`` element), never on sleeps.
Screenshots go to ``$RG_SCREENSHOT_DIR`` (default: the test's temporary folder); the README's were
made with ``RG_SCREENSHOT_DIR=docs/screenshots RG_BROWSER_MODEL=smollm2-135m``.
"""

import os
import shutil
import socket
import subprocess
import sys
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM, CHROMEDRIVER = shutil.which("chromium"), shutil.which("chromedriver")
pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver "
                                 "(.ci/run installs them)")]


def free_port() -> int:
    with socket.socket() as handle:
        handle.bind(("127.0.0.1", 0))
        return handle.getsockname()[1]


@pytest.fixture(scope="module")
def sweep_store(tmp_path_factory) -> Path:
    """The result store the server reads (``RG_STORE``); empty until a test runs a sweep into it."""
    return tmp_path_factory.mktemp("sweep-store")


@pytest.fixture(scope="module")
def server(sweep_store):
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(ROOT / "app.py"), "--server.port", str(port),
         "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
         "--server.fileWatcherType", "none"],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "RG_STORE": str(sweep_store)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):  # the health endpoint answers once the server is up (bounded: 60 s)
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(process.stdout.read().decode()) from None
            socket.socket().close()
            import time

            time.sleep(0.1)
    yield url
    process.terminate()
    process.wait(timeout=20)


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--window-size=1500,1800"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    yield driver
    driver.quit()


def wait_until_finished(driver, timeout: float = 600) -> None:
    """Wait for the script to have run (the app's own state) and at least one chart to be drawn."""
    from selenium.webdriver.support.ui import WebDriverWait

    def finished(d) -> bool:
        state = d.execute_script(
            "const a = document.querySelector('[data-testid=stApp]');"
            "return a ? a.getAttribute('data-test-script-state') : null;")
        charts = d.execute_script("return document.querySelectorAll('.js-plotly-plot').length;")
        errors = d.execute_script("return document.querySelectorAll('[data-testid=stException]').length;")
        return errors > 0 or (state == "notRunning" and charts > 0)

    WebDriverWait(driver, timeout, poll_frequency=0.25).until(finished)


def chart_y(driver, index: int = 0) -> list[float]:
    return driver.execute_script(
        "const c = document.querySelectorAll('.js-plotly-plot')[arguments[0]];"
        "return Array.from(c._fullData[0].y);", index)  # _fullData: decoded arrays


def screenshot(driver, name: str, tmp_path: Path) -> Path:
    folder = Path(os.environ.get("RG_SCREENSHOT_DIR") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def test_slider_changes_the_chart_without_exceptions(server, browser, tiny_models, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    model = os.environ.get("RG_BROWSER_MODEL") or str(tiny_models[("gpt_neox", False)])
    query = urlencode({"model": model, "n_tokens": os.environ.get("RG_BROWSER_N", "128")})
    browser.get(f"{server}/readout?{query}")
    wait_until_finished(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
    before = chart_y(browser)
    assert len(before) >= 4
    screenshot(browser, "readout-alignment", tmp_path)

    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    thumb = browser.find_element(By.CSS_SELECTOR, "input[type=range][aria-label='k (readout dimensions)']")
    browser.execute_script("arguments[0].focus();", thumb)  # the range input is visually hidden
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()

    WebDriverWait(browser, 600, poll_frequency=0.25).until(lambda d: chart_y(d) != before)
    wait_until_finished(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
    assert chart_y(browser) != before
    assert "k=" in browser.current_url

    for page, name in (("", "triage"), ("capacity", "capacity")):
        browser.get(f"{server}/{page}?{query}")
        wait_until_finished(browser)
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
        assert screenshot(browser, name, tmp_path).stat().st_size > 10_000


def test_sweep_results_in_the_browser(server, browser, sweep_store, series, tmp_path):
    from selenium.webdriver.common.by import By

    from analysis.runs.backends import LocalBackend
    from analysis.runs.plan import parse_plan
    from analysis.runs.sweep import run_sweep
    from analysis.storage.store import ResultStore

    plan = parse_plan({"models": [{"model": str(series), "revisions": "all"}], "n_tokens": 128, "k": [8, 16],
                       "ccr": [0, 1], "dtype": "float32"})
    assert run_sweep(plan, LocalBackend("cpu"), ResultStore(sweep_store), cache_dir=str(tmp_path)).ok
    browser.get(f"{server}/training")
    wait_until_finished(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
    heatmap = browser.execute_script("return document.querySelectorAll('.js-plotly-plot')[0]._fullData[0].z.length;")
    assert heatmap == 4  # embeddings + 3 blocks, one column per stored checkpoint
    assert "Sweep results" in browser.find_element(By.CSS_SELECTOR, "[data-testid=stRadio]").text
    screenshot(browser, "across-training-sweep", tmp_path)
