"""How long a preview waits for the server's slot (``dashboard.admission``) while another visitor's token map holds
it: a UMAP at N = 512, d = 576 (the built-in model's shape; Gaussian states, k = 100), the preview asked at five
moments of it. With the epochs' progress reports as pause points (``analysis.geometry.token_map``) and, for
comparison, without them (the map as one step). Prints both, measured in one run.

Usage: python bench/map_pauses.py   (as on a laptop: python bench/laptop.py bench/map_pauses.py)
"""

import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402

from analysis.geometry.token_map import token_map  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from dashboard.admission import Admission, Priority  # noqa: E402

ASKED_AFTER = (0.05, 0.15, 0.25, 0.35, 0.45)  # seconds into the map


def preview_wait(states: np.ndarray, readout: np.ndarray, asked_after: float, pauses: bool) -> float:
    """Seconds a preview of visitor B waits for the slot, asked ``asked_after`` seconds into visitor A's map."""
    policy, started = Admission(), threading.Event()

    def draw_map() -> None:
        with policy.hold(Priority.NEXT, "Token map (UMAP)", None, "A") as pause:
            started.set()
            token_map(states, readout, progress=(lambda *_report: pause()) if pauses else None)

    mapping = threading.Thread(target=draw_map)
    mapping.start()
    started.wait()
    time.sleep(asked_after)
    asked = time.perf_counter()
    with policy.hold(Priority.PREVIEW, "a preview", None, "B"):
        waited = time.perf_counter() - asked
    mapping.join()
    return waited


def main() -> None:
    print(cpu_description())
    rng = np.random.default_rng(0)
    states = rng.standard_normal((512, 576)).astype(np.float32)
    readout = np.linalg.qr(rng.standard_normal((576, 100)))[0]
    start = time.perf_counter()
    token_map(states, readout)  # compiled, or read from numba's disk cache
    first = time.perf_counter() - start
    start = time.perf_counter()
    token_map(states, readout)
    print(f"one map: {time.perf_counter() - start:.2f} s (the process's first: {first:.2f} s)")
    print(f"a preview asked {', '.join(map(str, ASKED_AFTER))} s into the map waits for the slot:")
    for pauses in (False, True):
        waits = [preview_wait(states, readout, after, pauses) for after in ASKED_AFTER]
        print(f"  {'with the epochs as pause points' if pauses else 'the map as one step':32} "
              + ", ".join(f"{wait:.2f}" for wait in waits) + f" s (longest {max(waits):.2f} s)")


if __name__ == "__main__":
    main()
