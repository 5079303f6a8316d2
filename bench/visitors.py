"""Visitors sharing one server, each in a chromium window of its own.

1. Visitor B moves the Layer slider back and forth (a page run every ``--gap`` seconds, nothing to compute: a visitor,
   or a script, rerunning pages back to back), while visitor A moves k, then CCR depth, each to a setting not in the
   cache. Prints when A's preview and A's exact curve are drawn, ``--limit`` seconds at most, and how many page runs B
   asked for meanwhile. Each visitor's quiet (``dashboard.admission``) holds only that visitor's own work outside its
   page run: a stream of B's page runs must not stall A's exact curve.
2. Visitor B walks the k and CCR sliders through settings it has not seen (k left to its end, CCR one right, k right
   to its end, ...; a step every ``--walk-gap`` seconds, at a seed of its own: a preview each time), while visitor A
   moves k, then CCR depth, as above. The slot is shared by use (``dashboard.admission``): a visitor asking for
   preview after preview takes turns with A's exact curve instead of holding it off.
3. Visitor C opens Readout alignment at a new seed, looks at the exact curve for 2 s and closes the window. Prints the
   server's core-seconds in the minute after: the work C's session had lined up (previews ahead, fill) stops when
   its browser goes.

Usage: python bench/visitors.py [--gap 0.05] [--walk-gap 0.3] [--limit 60]   (as on a laptop: bench/laptop.py first;
needs Debian's chromium and chromium-driver)
"""

import argparse
import os
import sys
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import urlencode

sys.path.insert(0, str(Path(__file__).resolve().parent))

from interaction import (  # noqa: E402
    ROOT,
    browser,
    cpu_seconds,
    shown_setting,
    slider_step,
    start_app,
    title,
    wait_for,
)

from analysis.geometry.pga import default_k  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from analysis.runs.settings import k_grid  # noqa: E402

BUILT_IN_D = 576  # d_model of the built-in model, the one this bench opens
MOVES = (("k", "k (readout dimensions)", "ARROW_LEFT"), ("CCR", "CCR depth (components removed)", "ARROW_RIGHT"))


def rerun_layers(driver, gap: float, stop: threading.Event, count: list[int]) -> None:
    """Step the Layer slider right, left, right, ... every ``gap`` seconds until ``stop``; ``count[0]``: steps made."""
    from selenium.webdriver.common.keys import Keys

    keys = (Keys.ARROW_RIGHT, Keys.ARROW_LEFT)
    while not stop.is_set():
        slider_step(driver, "Layer", keys[count[0] % 2])
        count[0] += 1
        time.sleep(gap)


def walk_settings(driver, gap: float, stop: threading.Event, count: list[int]) -> None:
    """Step k to one end of its slider, CCR one right, k to the other end, ... every ``gap`` seconds until ``stop``
    (each step a setting not seen before); ``count[0]``: steps made."""
    from selenium.webdriver.common.keys import Keys

    grid = k_grid(BUILT_IN_D)
    place, way = grid.index(default_k(BUILT_IN_D)), -1
    while not stop.is_set():
        if 0 <= place + way < len(grid):
            place += way
            slider_step(driver, "k (readout dimensions)", Keys.ARROW_LEFT if way < 0 else Keys.ARROW_RIGHT)
        else:
            way = -way
            slider_step(driver, "CCR depth (components removed)", Keys.ARROW_RIGHT)
        count[0] += 1
        time.sleep(gap)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--gap", type=float, default=0.05, help="seconds between visitor B's layer moves")
    parser.add_argument("--walk-gap", type=float, default=0.3, help="seconds between visitor B's steps to new settings")
    parser.add_argument("--limit", type=float, default=60, help="seconds to wait for A's exact curve")
    args = parser.parse_args()
    print(cpu_description())
    cache = Path(tempfile.mkdtemp(prefix="rg-visitors-"))
    models = Path(os.environ.get("RG_MODELS_DIR", ROOT / "cache" / "models"))
    os.environ["RG_MODELS_DIR"] = str(models)
    process, url, _ = start_app(cache, models)
    print(f"{os.cpu_count()} CPU cores, built-in model, N = 512")
    try:
        query = {"model": "smollm2-135m", "n_tokens": 512}
        beside(url, urlencode(query), urlencode(query), rerun_layers, args.gap, args.limit,
               f"Visitor B moves the Layer slider every {args.gap:g} s")
        beside(url, urlencode({**query, "seed": 3}), urlencode({**query, "seed": 2}), walk_settings, args.walk_gap,
               args.limit, f"Visitor B (a seed of its own) steps to a new setting every {args.walk_gap:g} s")
        left_behind(url, urlencode({**query, "seed": 1}), process.pid)
    finally:
        process.terminate()


def beside(url: str, query_a: str, query_b: str, steps, gap: float, limit: float, what: str) -> None:
    """Visitor A's moves of k and CCR depth while visitor B's ``steps`` (:func:`rerun_layers`, :func:`walk_settings`)
    go on every ``gap`` seconds."""
    from selenium.webdriver.common.keys import Keys

    print(f"\n{what}\n{'A moves':20} {'preview drawn':>13} {'exact drawn':>12} {'B moves':>12}")
    a, b = browser(), browser()
    try:
        for driver, query in ((a, query_a), (b, query_b)):
            driver.get(f"{url}/readout?{query}")
            wait_for(driver, "title().includes('z by layer') && !title().includes('Preview')")
        for short, label, key in MOVES:
            time.sleep(3)  # the previews ahead of A's setting are ready: the preview is drawn at once
            stop, count = threading.Event(), [0]
            rerunning = threading.Thread(target=steps, args=(b, gap, stop, count))
            rerunning.start()
            try:
                time.sleep(1)
                before, start = title(a), time.perf_counter()
                slider_step(a, label, getattr(Keys, key))
                wait_for(a, "title() !== args[0] && title().includes('z by layer')", before)
                drawn = time.perf_counter() - start
                try:
                    wait_for(a, "!title().includes('Preview')", timeout=limit)
                    exact = f"{time.perf_counter() - start:11.2f}s"
                except Exception:  # selenium's TimeoutException
                    exact = f"> {limit:g} s"
            finally:
                stop.set()
                rerunning.join()
            print(f"{short + ': ' + shown_setting(a):20} {drawn:12.2f}s {exact:>12} {count[0]:12d}")
    finally:
        a.quit()
        b.quit()


def left_behind(url: str, query: str, server: int) -> None:
    """A visitor opens Readout alignment, looks at the exact curve for 2 s and closes the window: the server's
    core-seconds over the minute after."""
    driver = browser()
    try:
        driver.get(f"{url}/readout?{query}")
        wait_for(driver, "title().includes('z by layer') && !title().includes('Preview')")
        time.sleep(2)
    finally:
        driver.quit()
    used, start = cpu_seconds(server), time.perf_counter()
    print("\nA visitor closes the window 2 s after its exact curve: the server's core-seconds after")
    for second in (10, 60):
        time.sleep(second - (time.perf_counter() - start))
        print(f"{second:3d} s: {cpu_seconds(server) - used:5.1f} core-s")


if __name__ == "__main__":
    main()
