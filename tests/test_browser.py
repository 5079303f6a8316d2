"""A real browser (Debian's chromium via Selenium) against the server `make app` starts (`python -m dashboard`,
`streamlit run app.py` with the libraries loaded first) on a free localhost port.

Waits on the app's own state (``data-test-script-state`` on the ``stApp`` element), never on sleeps.
Screenshots go to ``$RG_SCREENSHOT_DIR`` (default: the test's temporary folder); the README's were
made with ``RG_SCREENSHOT_DIR=docs/screenshots RG_BROWSER_MODEL=smollm2-135m``.
"""

import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode, urlsplit

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
def server(sweep_store, tmp_path_factory):
    """The app's server; its output goes to a file (a pipe nobody reads would block it once full), shown when it
    fails to start."""
    port = free_port()
    log = tmp_path_factory.mktemp("server") / "server.log"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "dashboard", "--server.port", str(port),
             "--server.address", "127.0.0.1", "--server.headless", "true", "--browser.gatherUsageStats", "false",
             "--server.fileWatcherType", "none"],
            cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), "RG_STORE": str(sweep_store)},
            stdout=output, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(3000):  # the health endpoint answers once the server is up (bounded: 300 s; on a fresh clone the
        # server fetches and de-quantises the built-in model first)
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                break
        except OSError:
            if process.poll() is not None:
                raise RuntimeError(log.read_text(errors="replace")) from None
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
                 "--disable-sync", "--window-size=1500,1800", "--host-resolver-rules=MAP insecure.test 127.0.0.1"):
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


def chart_y(driver, index: int = 0) -> list[float] | None:
    """The first trace's y values of chart `index`, or None while that chart is being (re)drawn."""
    return driver.execute_script(
        "const c = document.querySelectorAll('.js-plotly-plot')[arguments[0]];"
        "const t = c && c._fullData && c._fullData[0];"  # _fullData: decoded arrays
        "return t && t.y ? Array.from(t.y) : null;", index)


# plotly.js as the page keeps it in its IndexedDB store (dashboard.plot): [its address, its size], or null; given an
# address, a three-byte copy that is not plotly.js is kept under it instead
KEPT = """
const [poison, done] = arguments.length > 1 ? [arguments[0], arguments[1]] : [null, arguments[0]];
const opening = indexedDB.open('readout-geometry', 1);
opening.onupgradeneeded = () => opening.result.createObjectStore('files');
opening.onsuccess = () => {
  const base = opening.result, files = base.transaction('files', 'readwrite'), store = files.objectStore('files');
  const request = poison ? store.put({url: poison, bytes: new TextEncoder().encode('<p>').buffer}, 'plotly.js')
                         : store.get('plotly.js');
  files.oncomplete = () => { base.close(); const kept = poison ? null : request.result;
                             done(kept ? [kept.url, kept.bytes.byteLength] : null); };
};
"""


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
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import WebDriverWait

    browser.get(f"{server}/readout?{query}")
    wait_until_finished(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
    # the page reruns once its exact curve is in, which may redraw the chart just now: the curve once it is drawn
    before = WebDriverWait(browser, 60, poll_frequency=0.25).until(lambda d: chart_y(d))
    assert len(before) >= 4
    screenshot(browser, "readout-alignment", tmp_path)

    first_chart = "return document.querySelectorAll('.js-plotly-plot')[0];"
    drawn = browser.execute_script(first_chart)
    browser.execute_script("window.__fullscreen = arguments[0]._context.modeBarButtonsToAdd[0].click;", drawn)
    thumb = browser.find_element(By.CSS_SELECTOR, "input[type=range][aria-label='k (readout dimensions)']")
    browser.execute_script("arguments[0].focus();", thumb)  # the range input is visually hidden
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()

    WebDriverWait(browser, 600, poll_frequency=0.25).until(lambda d: chart_y(d) not in (None, before))
    wait_until_finished(browser)
    assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
    assert chart_y(browser) != before
    assert browser.execute_script(first_chart) == drawn  # the chart updated in place (dashboard.plot), not built anew
    assert browser.execute_script("return window.__fullscreen === arguments[0]._context.modeBarButtonsToAdd[0].click;",
                                  drawn)  # with the same config: Plotly.react redraws only what changed
    assert "k=" in browser.current_url

    # the toolbar offers no upload to Plotly's cloud; its last button shows the chart on the whole screen
    buttons = browser.execute_script("return [...arguments[0].querySelectorAll('.modebar-btn')];", drawn)
    titles = [b.get_attribute("data-title") for b in buttons]
    assert "Share chart..." not in titles and titles[-1] == "Full screen"
    ActionChains(browser).move_to_element(drawn).perform()
    ActionChains(browser).move_to_element(buttons[-1]).click().perform()
    size = ("const c = arguments[0]; return [document.fullscreenElement === c, c._fullLayout.width, "
            "c._fullLayout.height, window.innerWidth, window.innerHeight];")
    WebDriverWait(browser, 30, poll_frequency=0.25).until(lambda d: d.execute_script(size, drawn)[:3] == [
        True, *d.execute_script(size, drawn)[3:]])  # the screen's size
    browser.execute_script("document.exitFullscreen();")
    WebDriverWait(browser, 30, poll_frequency=0.25).until(lambda d: d.execute_script(size, drawn)[0] is False)
    WebDriverWait(browser, 30, poll_frequency=0.25).until(lambda d: d.execute_script(size, drawn)[2] == 380)
    # plotly.js: sent gzipped as it lies on disk (the server compresses nothing per request), kept by the browser
    from dashboard.plot import gzipped_plotly_js

    served = urllib.request.urlopen(urllib.request.Request(
        f"{server}/component/dashboard.plot.plotly_js/{gzipped_plotly_js().name}", headers={"Accept-Encoding": "gzip"}))
    assert served.headers["Content-Type"] == "application/gzip" and "Content-Encoding" not in served.headers
    assert served.read() == gzipped_plotly_js().read_bytes()
    path = urlsplit(served.url).path
    assert browser.execute_async_script(KEPT) == [path, gzipped_plotly_js().stat().st_size]
    # a kept copy that is not plotly.js (a proxy's page, say) is passed over, and the file fetched and kept again
    browser.execute_async_script(KEPT, path)
    assert browser.execute_async_script(KEPT) == [path, 3]
    browser.execute_async_script("caches.open('readout-geometry').then(s => s.put(arguments[0], new Response('x')))"
                                 ".then(() => arguments[1]());", served.url)  # where an earlier version kept it
    browser.refresh()
    wait_until_finished(browser, timeout=120)
    assert chart_y(browser)
    assert not browser.execute_async_script("caches.has('readout-geometry').then(arguments[0]);")  # freed
    WebDriverWait(browser, 30, poll_frequency=0.25).until(
        lambda d: d.execute_async_script(KEPT) == [path, gzipped_plotly_js().stat().st_size])
    outside = [e["message"] for e in browser.get_log("browser") if not e["message"].startswith(server)]
    assert not [message for message in outside if "http" in message.split(" ")[0]], outside  # nothing from elsewhere
    # on plain http under another name (an insecure page, where a browser has no cache storage): kept all the same
    insecure = server.replace("127.0.0.1", "insecure.test")  # chromium resolves it to 127.0.0.1 (the fixture)
    for visit in ("first", "again"):
        browser.get(f"{insecure}/readout?{query}")
        wait_until_finished(browser, timeout=120)
        assert chart_y(browser) and browser.execute_script("return window.isSecureContext;") is False
        fetched = browser.execute_script("return performance.getEntriesByType('resource')"
                                         ".filter(e => e.name.includes('plotly_js')).length;")
        assert fetched == (1 if visit == "first" else 0), visit
        WebDriverWait(browser, 30, poll_frequency=0.25).until(lambda d: d.execute_async_script(KEPT) is not None)

    for page, name in (("", "triage"), ("capacity", "capacity")):
        browser.get(f"{server}/{page}?{query}")
        wait_until_finished(browser)
        shown = browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]")
        assert not shown, [error.text for error in shown]  # the exception's text, to read in CI's log
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


PAYLOAD = '<img src=x onerror="window.__pwned=1"><script>window.__pwned=1</script>'


def settled(driver, timeout: float = 600) -> None:
    """Wait until the script has stopped running and stays stopped for a second (pages that rerun themselves
    once their exact numbers are in, or that draw no chart)."""
    from selenium.webdriver.support.ui import WebDriverWait

    script = ("const a = document.querySelector('[data-testid=stApp]');"
              "return a ? a.getAttribute('data-test-script-state') : null;")
    quiet = []

    def stopped(d) -> bool:
        quiet.append(d.execute_script(script) == "notRunning")
        return len(quiet) >= 5 and all(quiet[-5:])

    WebDriverWait(driver, timeout, poll_frequency=0.25).until(stopped)


CHARTS = """return [...document.querySelectorAll('.rg-plot')].map(c => ({
  top: c.getBoundingClientRect().top, height: c.offsetHeight, drawn: c.classList.contains('js-plotly-plot'),
  failed: c.textContent.startsWith('This chart could not be drawn'),
  text: c.layout ? JSON.stringify([c.layout.title, c.layout.annotations, c.layout.shapes]) : ''}));"""


def draw_every_chart(driver) -> None:
    """Draw the charts out of sight too, as printing does (they wait until they come near sight: dashboard.plot)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.execute_script("window.dispatchEvent(new Event('beforeprint'));")
    WebDriverWait(driver, 60, poll_frequency=0.25).until(
        lambda d: all(c["drawn"] or c["failed"] for c in d.execute_script(CHARTS)))


def no_script_ran(driver) -> bool:
    return driver.execute_script("return window.__pwned === undefined && !document.querySelector('img[src=\"x\"]') "
                                 "&& !document.querySelector('a[href*=\"evil.example\"]');")


def test_no_script_runs_from_a_hostile_model_text_or_link(server, browser, neox_folder, tmp_path):
    """A model whose config, folder name and text carry script and event handlers, and a crafted link: every page
    and the report show them as text, and nothing runs."""
    import json
    import shutil

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    from analysis.data.corpus import Sampling, load_corpus
    from analysis.runs import analyses
    from analysis.runs.settings import Compute, ModelChoice

    model = tmp_path / 'm"><img src=x onerror="window.__pwned=1">'
    shutil.copytree(neox_folder, model)
    config = json.loads((model / "config.json").read_text())
    config["architectures"] = [PAYLOAD]
    (model / "config.json").write_text(json.dumps(config))
    text = tmp_path / "text.txt"
    text.write_text(f"{PAYLOAD} [log in again](http://evil.example/login) and some ordinary prose.\n" * 600)
    query = urlencode({"model": str(model), "corpus": str(text), "n_tokens": 128,
                       "a": str(model), "b": f"{model}@main"})
    for page in ("", "readout", "capacity", "training", "models", "compare", "probes", "token_map"):
        browser.get(f"{server}/{page}?{query}")
        settled(browser)
        assert not browser.find_elements(By.CSS_SELECTOR, "[data-testid=stException]"), page
        if page == "token_map":  # hover text holds the tokens in context
            browser.execute_script("const c = document.querySelector('.js-plotly-plot');"
                                   "Plotly.Fx.hover(c, [{curveNumber: 0, pointNumber: 0}]);")
        assert no_script_ran(browser), page

    link = "[log in](http://evil.example/)"
    browser.get(f"{server}/capacity?{urlencode({'model': str(neox_folder), 'n_tokens': link})}")
    settled(browser)
    assert no_script_ran(browser) and link in browser.find_element(By.TAG_NAME, "body").text.replace("\u2060", "")

    loaded = analyses.open_model(ModelChoice(str(model)), Compute("cpu"))
    report = tmp_path / "report.html"
    report.write_text(analyses.model_report(loaded, load_corpus(str(text)), Sampling(n_tokens=128),
                                            Compute("cpu")).html())
    browser.get(report.as_uri())
    # its charts drawn (once, in CI under load, none were yet when the page had loaded)
    WebDriverWait(browser, 60, poll_frequency=0.25).until(
        lambda d: d.execute_script("return document.querySelectorAll('.js-plotly-plot').length;") >= 4)
    assert no_script_ran(browser) and PAYLOAD in browser.find_element(By.TAG_NAME, "body").text


LAYOUT_PROBLEMS = """
const problems = [];
const meets = (a, b) => a.right > b.left && a.left < b.right && a.bottom > b.top && a.top < b.bottom;
for (const plot of document.querySelectorAll('.js-plotly-plot')) {
  const title = plot.querySelector('.gtitle'), bar = plot.querySelector('.modebar');
  if (!title || !title.textContent) continue;
  const box = plot.getBoundingClientRect(), text = title.getBoundingClientRect();
  if (bar && meets(text, bar.getBoundingClientRect())) problems.push('title under the toolbar: ' + title.textContent);
  if (text.right > box.right + 1 || text.left < box.left - 1) problems.push('title cut: ' + title.textContent);
}
const labels = ['button', '[data-testid=stWidgetLabel]', '[data-testid=stMetricLabel]', '[data-testid=stMetricValue]',
  '[data-testid=stMetricDelta]'].map(s => `${s}, ${s} *`).join(', ');
for (const element of document.querySelectorAll(labels)) {
  if (element.offsetParent !== null && element.scrollWidth > element.clientWidth + 1)
    problems.push('clipped: ' + element.textContent.slice(0, 60));
}
return problems;
"""


@pytest.mark.parametrize("width", [1400, 1000])
def test_titles_clear_the_toolbar_and_labels_are_whole(server, browser, tiny_models, series, width):
    """Every page at a wide and a narrow window: no chart title meets plotly's toolbar or runs out of its chart,
    and no button, label or metric is cut."""
    model = tiny_models[("gpt_neox", False)]
    browser.set_window_size(width, 1800)
    try:
        for page in ("", "readout", "capacity", "training", "models", "compare", "probes", "token_map"):
            query = {"model": str(series if page == "training" else model), "n_tokens": 128}
            browser.get(f"{server}/{page}?{urlencode(query)}")
            settled(browser)
            draw_every_chart(browser)
            assert browser.execute_script(LAYOUT_PROBLEMS) == [], (page, width)
    finally:
        browser.set_window_size(1500, 1800)


MOVE_STATE = r"""
const app = document.querySelector('[data-testid=stApp]');
const plots = [...document.querySelectorAll('.js-plotly-plot')];
const title = plots.length && plots[0].layout && plots[0].layout.title ? plots[0].layout.title.text : '';
const k = document.querySelector("input[type=range][aria-label='k (readout dimensions)']");
return {state: app ? app.getAttribute('data-test-script-state') : null, title: title.replace(/<[^>]+>/g, ''),
        k: k ? k.closest('[data-testid=stSlider], [data-testid=stSelectSlider]').querySelector(
               '[data-testid=stSliderThumbValue]').innerText : null,
        plots: document.querySelectorAll('.rg-plot').length,
        stale: document.querySelectorAll('[data-stale=true] .rg-plot').length,
        firstStale: plots.length > 0 && plots[0].closest('[data-stale=true]') !== null,
        kSliders: document.querySelectorAll("input[type=range][aria-label='k (readout dimensions)']").length,
        bars: document.querySelectorAll('[data-testid=stProgress]').length,
        status: [...document.querySelectorAll('[data-testid=stCaptionContainer]')].map(e => e.innerText)
                .filter(t => t.includes('Previews ahead')).length};
"""


@pytest.fixture(scope="module")
def wider_model(tokenizer, tmp_path_factory) -> Path:
    """A random GPT-NeoX of d = 192 and 8 blocks: its preview at N = 1024 takes long enough to be seen."""
    from analysis.models.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("wider") / "model", "gpt_neox", tokenizer, d_model=192, n_layers=8)


def test_a_move_shows_the_new_setting_or_says_it_is_computing_and_the_page_ends_quiet(server, browser, wider_model):
    """The page's run ends with the preview drawn while the exact curve is computed outside it (one status line, no
    progress bar); after a move no chart of the previous k sits under the new slider value, the preview stays until the
    exact curve replaces it (no blank, no "Computing" between them), and when the page is drawn there are as many plots
    as the page shows and one k slider."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    query = urlencode({"model": str(wider_model), "n_tokens": 1024, "seed": 21, "k": 32})
    browser.get(f"{server}/readout?{query}")
    seen = []

    def watch(until) -> None:
        def step(d) -> bool:
            seen.append(d.execute_script(MOVE_STATE))
            return until(seen[-1])
        WebDriverWait(browser, 600, poll_frequency=0.05).until(step)

    # the page's run ended on the whole preview page: its status line's refresh may already be running (it waits for
    # the exact curve in its own run), so the script's state is not asked here; a run still computing shows a bar
    watch(lambda s: s["title"].startswith("Preview") and s["plots"] == 6 and s["status"] == 1)
    assert seen[-1]["bars"] == 0 and seen[-1]["k"] == "32"  # one quiet line, no bar

    seen.clear()  # a move while the exact curve is computed: k = 16 is not previewed yet
    thumb = browser.find_element("css selector", "input[type=range][aria-label='k (readout dimensions)']")
    browser.execute_script("arguments[0].focus();", thumb)
    ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()
    watch(lambda s: s["state"] == "notRunning" and s["title"].startswith("z by layer at k = 16"))  # exact, k = 16
    moved = [s for s in seen if s["k"] == "16"]
    # the server replaces the old chart 0.04-0.08 s after the key press; a browser short of CPU (two cores beside the
    # server's work) may draw that later, and shows the old chart faded as stale meanwhile: never as the current one
    assert moved and not [s for s in moved[3:] if "k = 32" in s["title"] and not s["firstStale"]]
    assert any(s["title"].startswith("Preview: z by layer at k = 16") for s in moved)  # previewed before the exact
    previewed = next(i for i, s in enumerate(moved) if s["title"].startswith("Preview: z by layer at k = 16"))
    assert all(s["title"].startswith(("Preview: z by layer at k = 16", "z by layer at k = 16"))
               for s in moved[previewed:])  # the page's rerun for the exact curve left the preview up until then
    settled(browser)  # then the page reruns once more when the work around it is done, and its status line rests
    watch(lambda s: s["state"] == "notRunning" and s["plots"] == 6 and s["stale"] == 0 and s["kSliders"] == 1
          and s["bars"] == 0)


def test_a_chart_out_of_sight_is_drawn_as_it_comes_near(server, browser, tiny_models):
    """In a laptop's window the charts below sight wait, their places kept; one scrolled to is drawn at the setting
    the sliders show (a move made while it was out of sight included); printing draws every chart."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1500, 900)
    try:
        query = urlencode({"model": str(tiny_models[("gpt_neox", False)]), "n_tokens": 128, "seed": 5})
        browser.get(f"{server}/readout?{query}")
        settled(browser)
        charts = browser.execute_script(CHARTS)
        sight = browser.execute_script("return document.querySelector('[data-testid=stMain]').clientHeight;")
        assert charts[0]["drawn"] and not charts[-1]["drawn"] and charts[-1]["top"] > 1.25 * sight, charts
        assert min(c["height"] for c in charts) >= 300, charts  # the figures' own heights (300-380 px), drawn or not

        thumb = browser.find_element("css selector", "input[type=range][aria-label='k (readout dimensions)']")
        browser.execute_script("arguments[0].focus();", thumb)
        ActionChains(browser).send_keys(Keys.ARROW_LEFT).perform()
        WebDriverWait(browser, 300, poll_frequency=0.25).until(lambda d: (lambda s: s["state"] == "notRunning" and (
            s["title"].startswith(f"z by layer at k = {s['k']}")))(d.execute_script(MOVE_STATE)))
        settled(browser)
        k = browser.execute_script(MOVE_STATE)["k"]
        assert not browser.execute_script(CHARTS)[-1]["drawn"]
        browser.execute_script("const c = document.querySelectorAll('.rg-plot'); c[c.length - 1].scrollIntoView();")
        WebDriverWait(browser, 60, poll_frequency=0.25).until(lambda d: d.execute_script(CHARTS)[-1]["drawn"])
        assert f'"k = {k}"' in browser.execute_script(CHARTS)[-1]["text"]  # the readout spectrum's mark at the new k

        browser.execute_script("document.querySelector('[data-testid=stMain]').scrollTo(0, 0);")
        assert not all(c["drawn"] for c in browser.execute_script(CHARTS))  # scrolled past, never near sight
        draw_every_chart(browser)
    finally:
        browser.set_window_size(1500, 1800)
