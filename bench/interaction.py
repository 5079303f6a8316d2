"""What a user feels: the real app (`python -m dashboard`, as `make app` starts it) driven by chromium, from an
empty results cache.

Prints, in one run, with the machine's core count: the first-answer times of Triage (card, preview
curve, verdict) and Readout alignment (preview, exact curve); for cache-missing moves of k and CCR
depth (one step, then jumps to a slider's end or start: End, Home), the seconds until the preview is
drawn and until the exact curve replaces it, with the core-seconds the server and chromium used meanwhile;
the largest |z_preview - z_exact| over the width of z's 95 % interval (the exact curves read back from the
cache, the previews computed again: they are seeded, and never stored); per move, the app's exact curve
against the engine's own sweep of the same setting on the same states; a quick drag along each slider (``--drag``
steps 0.1 s apart, at a seed of its own): until its last setting is drawn, and its exact curve; and (``--pages``)
each other page's first chart and exact charts.

Usage: python bench/interaction.py [--model smollm2-135m | --shape pythia-410m] [--n-tokens 512] [--moves 10]
[--jumps 4] [--pause 0] [--drag 5] [--first triage | readout | models | compare] [--pages] [--series FOLDER] (needs
Debian's chromium and chromium-driver; ``--fetch``: the model is fetched and converted first; ``--shape``: a random
model of that Pythia shape is saved with ``save_pretrained`` first; ``--first``: the page opened first on the empty
cache (Across models and Side by side of the model alone: until its first chart and until its exact charts are drawn);
``--pages``: then each other page that computes on the model, until its first chart and until its exact charts are
drawn; ``--series``: then Across training on a checkpoint folder, e.g. ``readout-geometry train-demo``'s, likewise).
"""

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlencode

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from analysis.models.devices import cpu_description  # noqa: E402


def free_port() -> int:
    with socket.socket() as handle:
        handle.bind(("127.0.0.1", 0))
        return handle.getsockname()[1]


def start_app(cache: Path, models: Path, roots: tuple[Path, ...] = ()) -> tuple[subprocess.Popen, str, float]:
    """The app's server, its address, and the seconds it took to listen (on its first start, with the built-in model
    fetched and de-quantised: ``python -m dashboard``'s ``prepare_builtin``)."""
    port = free_port()
    start = time.perf_counter()
    env = {**os.environ, "RG_CACHE_DIR": str(cache), "RG_MODELS_DIR": str(models),
           "RG_ALLOWED_ROOTS": os.pathsep.join(map(str, (cache, *roots)))}
    process = subprocess.Popen([sys.executable, "-m", "dashboard", "--server.port", str(port), "--server.headless",
                                "true", "--browser.gatherUsageStats", "false", "--server.fileWatcherType", "none",
                                "--global.developmentMode", "false"],  # also where streamlit is not in site-packages
                               cwd=ROOT, env=env,
                               stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(3000):
        try:
            if urllib.request.urlopen(f"{url}/_stcore/health", timeout=1).read() == b"ok":
                return process, url, time.perf_counter() - start
        except OSError:
            time.sleep(0.1)
    raise RuntimeError("the app did not start")


def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1500,1800"):
        options.add_argument(flag)
    return webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)


# The page is watched inside the browser (a 20 ms timer in the page), not polled over WebDriver: polling 20 times a
# second cost the chromium renderer and chromedriver a share of the two cores the server is measured on.
TITLE = ("const c = document.querySelectorAll('.js-plotly-plot')[0];"
         "return c && c.layout && c.layout.title ? String(c.layout.title.text) : '';")
WATCH_SECONDS = 100
WATCH = """
const [condition, args, done] = [new Function('title', 'titles', 'text', 'args', 'return (' + arguments[0] + ');'),
                                 arguments[1], arguments[arguments.length - 1]];
const title = () => { """ + TITLE + """ };
const titles = () => Array.from(document.querySelectorAll('.js-plotly-plot'),
                                c => c.layout && c.layout.title ? String(c.layout.title.text) : '').join(' | ');
const text = () => document.querySelector('[data-testid=stMain]')?.textContent || '';
(function watch() {
  if (document.querySelector('[data-testid=stException]')) return done('exception');
  let holds = false;
  try { holds = condition(title, titles, text, args); } catch (error) { holds = false; }
  if (holds) return done('ok');
  setTimeout(watch, 20);
})();
"""


def wait_for(driver, condition: str, *args, timeout: float = 1800) -> float:
    """Seconds until the JavaScript ``condition`` (of ``title()``: the first chart's title, ``titles()``: every chart's,
    ``text()``: the main block's text, and ``args``) holds in the page; selenium's TimeoutException after ``timeout``.
    Watched ``WATCH_SECONDS`` at a time: WebDriver's client gives up on a call after 120 s."""
    from selenium.common.exceptions import TimeoutException

    start = time.perf_counter()
    while True:
        driver.set_script_timeout(max(1.0, min(WATCH_SECONDS, timeout - (time.perf_counter() - start))))
        try:
            found = driver.execute_async_script(WATCH, condition, list(args))
        except TimeoutException:
            if time.perf_counter() - start >= timeout:
                raise
            continue
        if found == "exception":
            raise RuntimeError("the page shows an exception")
        return time.perf_counter() - start


def since(start: float, driver, condition: str, *args, timeout: float = 1800) -> float:
    """Seconds from ``start`` (a ``time.perf_counter()`` before the page was opened or the key pressed) until
    ``condition`` holds (:func:`wait_for`): the WebDriver calls between two waits (reading a title: 0.04-0.5 s while
    the server's work holds both cores) count, as they do for the visitor."""
    wait_for(driver, condition, *args, timeout=timeout)
    return time.perf_counter() - start


def title(driver) -> str:
    return driver.execute_script(TITLE)


def shown_setting(driver) -> str:
    """The setting the z chart is drawn at, as its title says (e.g. ``k = 16, CCR-4``)."""
    return re.sub(r"<[^>]+>", "", title(driver)).split("z by layer at ")[-1]


def slider_step(driver, label: str, key: str) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.common.by import By

    selector = f"input[type=range][aria-label='{label}']"
    wait_for(driver, "document.querySelector(args[0]) !== null", selector, timeout=60)
    thumb = driver.find_element(By.CSS_SELECTOR, selector)
    driver.execute_script("arguments[0].focus();", thumb)
    ActionChains(driver).send_keys(key).perform()


def main() -> None:
    from selenium.webdriver.common.keys import Keys

    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--n-tokens", type=int, default=512)
    parser.add_argument("--moves", type=int, default=10)
    parser.add_argument("--pause", type=float, default=0.0,
                        help="seconds to look at each exact curve before the next move (background fill runs)")
    parser.add_argument("--jumps", type=int, default=4, help="then this many jumps to a slider's end or start")
    parser.add_argument("--drag", type=int, default=5,
                        help="then a quick drag along each slider: this many steps 0.1 s apart (0: none)")
    parser.add_argument("--first", choices=("triage", "readout", *FIRST_PAGES), default="triage",
                        help="the page opened first, on the empty results cache")
    parser.add_argument("--fetch", action="store_true", help="start with no model fetched either (first fetch)")
    parser.add_argument("--shape", help="a random model of this Pythia shape (bench/gpu.py's SHAPES), saved first")
    parser.add_argument("--pages", action="store_true",
                        help="then open each other page that computes on the model: its first chart, its exact charts")
    parser.add_argument("--series", type=Path,
                        help="then open Across training on this checkpoint folder (e.g. train-demo's neox-d128)")
    args = parser.parse_args()
    print(cpu_description())  # the server inherits bench/laptop.py's settings
    cache = Path(tempfile.mkdtemp(prefix="rg-interaction-"))
    if args.shape:  # inside the cache folder: the only root the app may open
        from gpu import build_model

        from analysis.data.corpus import builtin_corpus
        from analysis.models.tiny import train_tokenizer

        args.model = str(cache / args.shape)
        build_model(args.shape, Path(args.model), train_tokenizer(builtin_corpus().text, vocab_size=512))
    models = cache / "models" if args.fetch else Path(os.environ.get("RG_MODELS_DIR", ROOT / "cache" / "models"))
    os.environ["RG_MODELS_DIR"] = str(models)  # the app's and, afterwards, the agreement's
    converted = any(models.glob("gguf-*/config.json"))
    process, url, listening = start_app(cache, models, (args.series.resolve(),) if args.series else ())
    driver = browser()
    query = urlencode({"model": args.model, "n_tokens": args.n_tokens})
    fetched = "model not fetched yet" if args.fetch else "model fetched" + ("" if converted else ", not converted")
    print(f"{os.cpu_count()} CPU cores; model {args.model}, N = {args.n_tokens}; results cache empty ({cache}), "
          f"{fetched}; the server listened after {listening:.1f} s")
    visited, shown = [], set()
    try:
        if args.first == "triage":
            opened = time.perf_counter()
            driver.get(f"{url}/?{query}")
            card = since(opened, driver, "text().includes('blocks, d_model')")
            preview = since(opened, driver, "title().includes('Preview') || text().includes('Peak z')")
            verdict = since(opened, driver, "text().includes('Peak z') && !title().includes('Preview')")
            print(f"Triage, first answer: card {card:.1f} s, z preview {preview:.1f} s, full verdict {verdict:.1f} s")
        elif args.first in FIRST_PAGES:
            print(f"{'page':30} {'first chart':>11} {'exact charts':>12}  first chart's title")
            page_times(driver, url, query, args.first, FIRST_PAGES[args.first])
        opened = time.perf_counter()
        driver.get(f"{url}/readout?{query}")
        first = since(opened, driver, "title().includes('z by layer')")
        exact = since(opened, driver, "title().includes('z by layer') && !title().includes('Preview')")
        print(f"Readout alignment{' opened first' if args.first == 'readout' else ''}: first chart {first:.1f} s, "
              f"exact curve {exact:.1f} s")
        shown.add(shown_setting(driver))
        print(f"\nEach move {args.pause:g} s after the exact curve of the last one is drawn")
        print(f"{'move':18} {'preview drawn':>14} {'exact drawn':>12} {'core-s: server':>14} {'chromium':>8}")
        k_label, ccr_label = "k (readout dimensions)", "CCR depth (components removed)"
        steps = [(ccr_label, Keys.ARROW_RIGHT), (k_label, Keys.ARROW_LEFT)]
        jumps = [(k_label, Keys.END), (ccr_label, Keys.END), (k_label, Keys.HOME), (ccr_label, Keys.HOME)]
        misses = 0
        time.sleep(args.pause if args.moves else 0)  # the page's own exact curve is the first one drawn
        for step in range(4 * args.moves):
            if misses >= args.moves:
                break
            missed = move(driver, *steps[step % 2], visited, shown, process.pid)
            misses += missed
            time.sleep(args.pause if missed else 0)
        if args.jumps:
            print("\nJumps to either end of a slider (End, Home)")
        for jump in range(args.jumps):
            move(driver, *jumps[jump % len(jumps)], visited, shown, process.pid)
            time.sleep(args.pause)
        if args.drag:
            print(f"\nA quick drag: {args.drag} steps 0.1 s apart, from a page at a seed of its own\n"
                  f"{'drag':34} {'last drawn':>10} {'its exact':>10}")
            for seed, (label, key) in enumerate(steps, start=101):
                drag(driver, f"{url}/readout?{query}&seed={seed}", label, key, args.drag)
        if args.pages:
            other_pages(driver, url, query)
        if args.series:
            print(f"\nAcross training on {args.series.name}, nothing of it cached\n"
                  f"{'page':30} {'first chart':>11} {'exact charts':>12}  first chart's title")
            series_query = urlencode({"model": str(args.series.resolve()), "source": "Checkpoint folder",
                                      "n_tokens": args.n_tokens})
            page_times(driver, url, series_query, "training", "Across training")
        peak = re.search(r"VmHWM:\s+(\d+) kB", Path(f"/proc/{process.pid}/status").read_text())
        print(f"\nthe server's peak memory (resident set): {int(peak.group(1)) / 2**20:.2f} GiB")
    finally:
        driver.quit()
        process.terminate()
    print(f"\n{len(visited)} cache-missing moves and jumps; {agreement(cache, args, visited)}")


TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int | None = None) -> float:
    """Core-seconds used so far by process ``pid``, or (None) by every chromium process."""
    folders = [Path(f"/proc/{pid}")] if pid is not None else [
        folder for folder in Path("/proc").iterdir() if folder.name.isdigit() and "chrom" in _read(folder / "comm")]
    return sum(_used(folder) for folder in folders)


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # a process that ended meanwhile
        return ""


def _used(folder: Path) -> float:
    fields = _read(folder / "stat").rsplit(")", 1)[-1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS if len(fields) > 12 else 0.0


def move(driver, label: str, key: str, visited: list[tuple[str, float]], shown: set[str], server: int) -> bool:
    """Press ``key`` on slider ``label``; print the seconds until the chart shows the new setting and, when
    that was a preview, until the exact curve replaces it (noted in ``visited`` with the setting), with the
    core-seconds the ``server`` process and chromium used meanwhile (on 2 cores, what chromium draws is taken from
    the computation). A setting not ``shown`` before and drawn exact at once (on CUDA, where there is no preview)
    is a miss too. Returns whether it missed the cache."""
    before = title(driver)
    used = cpu_seconds(server), cpu_seconds()
    start = time.perf_counter()
    slider_step(driver, label, key)
    drawn = since(start, driver, "title() !== args[0] && title().includes('z by layer')", before)
    now, setting = title(driver), shown_setting(driver)
    if "Preview" not in now:
        cached = setting in shown
        shown.add(setting)
        print(f"{setting:18} {'(cached)' if cached else '(none)':>14} {drawn:11.2f}s")
        if not cached:
            visited.append((setting, drawn))
        return not cached
    shown.add(setting)
    done = since(start, driver, "!title().includes('Preview') && title().includes('z by layer')")
    print(f"{setting:18} {drawn:13.2f}s {done:11.2f}s {cpu_seconds(server) - used[0]:14.1f} "
          f"{cpu_seconds() - used[1]:8.1f}")
    visited.append((setting, done))
    return True


def drag(driver, page: str, label: str, key: str, steps: int) -> None:
    """Open ``page`` (nothing of its seed cached) and, once its exact curve is drawn and its previews ahead are ready,
    press ``key`` on slider ``label`` ``steps`` times 0.1 s apart, as a quick drag does; print the seconds from the
    first press until the last setting is drawn and until its exact curve is. The pages of the settings passed over
    were superseded while they waited or computed: what they still cost comes before the last one."""
    driver.get(page)
    wait_for(driver, "title().includes('z by layer') && !title().includes('Preview')")
    time.sleep(3)
    start, before = time.perf_counter(), shown_setting(driver)
    for _ in range(steps):
        slider_step(driver, label, key)
        time.sleep(0.1)
    value = driver.execute_script(
        "return [...document.querySelectorAll('[data-testid=stSlider]')].find(s => s.innerText.includes(arguments[0]))"
        ".querySelector('[data-testid=stSliderThumbValue]').innerText", label)
    last = f"k = {value}," if label.startswith("k ") else f"CCR-{value}"
    drawn = since(start, driver, "title().includes(args[0])", last)
    done = since(start, driver, "title().includes(args[0]) && !title().includes('Preview')", last)
    print(f"{before + ' -> ' + shown_setting(driver):34} {drawn:9.2f}s {done:9.2f}s")


OTHER_PAGES = {"capacity": "Embedding geometry & capacity", "probes": "Linear probes", "token_map": "Token map"}
FIRST_PAGES = {"models": "Across models", "compare": "Side by side"}  # each on the model alone


def other_pages(driver, url: str, query: str, limit: float = 300) -> None:
    """Time each page of ``OTHER_PAGES`` (the model loaded, its hidden states cached) with :func:`page_times`."""
    print(f"\nOther pages, the model loaded\n{'page':30} {'first chart':>11} {'exact charts':>12}  first chart's title")
    for path, name in OTHER_PAGES.items():
        page_times(driver, url, query, path, name, limit)


def page_times(driver, url: str, query: str, path: str, name: str, limit: float = 300) -> None:
    """Open page ``path``: print the seconds until its first chart is drawn and until no chart is titled *Preview*,
    ``limit`` seconds at most (a screenshot of a page that missed it is saved)."""
    from selenium.common.exceptions import TimeoutException

    opened = time.perf_counter()
    driver.get(f"{url}/{path}?{query}")
    try:
        first = since(opened, driver, "titles().length > 0", timeout=limit)
        shown = re.sub(r"<[^>]+>", "", title(driver))[:60]
        exact = since(opened, driver, "titles().length > 0 && !titles().includes('Preview')", timeout=limit - first)
    except TimeoutException:
        shot = Path(tempfile.gettempdir()) / f"interaction-{path}.png"
        driver.save_screenshot(str(shot))
        print(f"{name:30} not within {limit:g} s: {shot}")
        return
    print(f"{name:30} {first:10.1f}s {exact:11.1f}s  {shown}")


def agreement(cache: Path, args, visited: list[tuple[str, float]]) -> str:
    """How far previews fall from the exact z over the visited settings (exact from the cache, previews recomputed),
    and how long the app took for each exact curve against the engine's own sweep of the same setting (the same
    states, each layer's PCA remembered as the app has it, nothing stored)."""
    os.environ["RG_CACHE_DIR"] = str(cache)
    import numpy as np

    from analysis.data.corpus import Sampling, builtin_corpus
    from analysis.geometry.pga import pga_sweep
    from analysis.runs import analyses
    from analysis.runs.pipeline import model_readout
    from analysis.runs.settings import (
        Compute,
        ModelChoice,
        block_preview,
        pga_settings,
        preview_layers,
        preview_settings,
    )
    from analysis.storage.memory import EngineMemory

    compute = Compute()
    loaded = analyses.open_model(ModelChoice(args.model), compute)
    sampling, gaps, widths, small = Sampling(args.n_tokens), [], [], []
    states = analyses.model_hidden_states(loaded, builtin_corpus(), sampling, compute).value.states
    basis, memory = model_readout(loaded), EngineMemory()
    # every layer's PCA, and its digest remembered under a name for the states, as the app has them
    pga_sweep(states, basis, pga_settings(loaded.anatomy.d_model, n_null=2), memory=memory, states_key="bench")
    print("\nthe app's exact curve (from the key press) against the engine's sweep of the same setting")
    for setting, app_seconds in visited:
        k, ccr = int(setting.split("k = ")[1].split(",")[0]), int(setting.split("CCR-")[1])
        exact_settings = pga_settings(loaded.anatomy.d_model, (k,), (ccr,))
        start = time.perf_counter()
        pga_sweep(states, basis, exact_settings, memory=memory, states_key="bench")
        engine = time.perf_counter() - start
        print(f"{setting:18} app {app_seconds:6.2f} s, engine {engine:5.2f} s: {app_seconds / engine:.2f}x")
        exact = analyses.model_pga(loaded, builtin_corpus(), sampling, exact_settings, compute=compute,
                                   stored_only=True)
        if exact is None:
            continue
        # previews are not stored: computed again, seeded alike; both kinds where they differ (made ahead of a move,
        # made by the page while the visitor waits: where that is the exact run at a few layers, it agrees exactly)
        kinds = {preview_settings(exact_settings, loaded.anatomy.d_model)}
        if preview_layers(exact_settings, args.n_tokens, len(states), len(states) // 2) is None:
            kinds.add(block_preview(exact_settings, loaded.anatomy.d_model))
        for kind in kinds:
            preview = analyses.model_pga(loaded, builtin_corpus(), sampling, kind, compute=compute)
            for p, e in zip(preview.results, exact.results, strict=True):
                gaps.append(abs(p.z - e.z))
                widths.append(e.z_interval[1] - e.z_interval[0])
                small.append(abs(e.z) < 2)
    if not gaps:
        return "no exact curve in the cache to compare with"
    gaps, widths, small = np.array(gaps), np.array(widths), np.array(small)
    ratio = gaps / widths
    return (f"{len(gaps)} (preview, layer) z values: largest |z_preview - z_exact| {gaps.max():.2f} "
            f"({gaps[small].max() if small.any() else 0:.2f} where |z| < 2); "
            f"in widths of z's 95 % interval: median {np.median(ratio):.2f}, largest {ratio.max():.2f}")


if __name__ == "__main__":
    main()
