"""The disk cache's format: JSON + .npy (this project) against pickle (what it used before), for the
largest value the dashboard reads on every page, the hidden states of the built-in model at N = 512
([31, 512, 576] float32, 37 MB), and for one layer's PGA result. Prints write and read times and their
ratios, measured in one run. Usage: python bench/cache.py"""

import pickle
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.activations.hidden import HiddenStates  # noqa: E402
from analysis.data.corpus import TokenSample  # noqa: E402
from analysis.geometry.synthetic import planted_readout  # noqa: E402
from analysis.runs.analyses import arrays_pga  # noqa: E402
from analysis.runs.settings import pga_settings  # noqa: E402
from analysis.storage.cache import ResultCache  # noqa: E402
from analysis.storage.codec import decode, encode  # noqa: E402


def best_of(function, repeats: int = 5) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    rng = np.random.default_rng(0)
    sample = TokenSample(rng.integers(0, 49152, (32, 128)), np.arange(32) * 127, np.repeat(np.arange(32), 16),
                         np.tile(np.arange(4, 20), 32))
    states = HiddenStates(rng.standard_normal((31, 512, 576), dtype=np.float32),
                          rng.standard_normal((512, 576), dtype=np.float32), sample)
    h, w_u = planted_readout(n=200)
    (layer,) = arrays_pga(h, w_u, pga_settings(w_u.shape[1], (8,), n_null=100)).results
    print(f"{'value':28} {'pickle write':>12} {'ours write':>10} {'pickle read':>11} {'ours read':>9} "
          f"{'read ratio':>10}")
    for name, value in (("hidden states (37 MB)", states), ("one layer's PGA result", layer)):
        pickled, ours = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL), encode(value)
        times = [best_of(lambda v=value: pickle.dumps(v, protocol=pickle.HIGHEST_PROTOCOL)),
                 best_of(lambda v=value: encode(v)), best_of(lambda p=pickled: pickle.loads(p)),
                 best_of(lambda o=ours: decode(o))]
        print(f"{name:28} {times[0]*1e3:10.2f}ms {times[1]*1e3:8.2f}ms {times[2]*1e3:9.2f}ms {times[3]*1e3:7.2f}ms "
              f"{times[3] / times[2]:9.2f}x")
    with tempfile.TemporaryDirectory() as folder:
        cache = ResultCache(folder)
        cache.put("bench", 1, {"a": 1}, states)
        through = best_of(lambda: cache.get("bench", 1, {"a": 1}, object))
    print(f"\nthrough the disk cache (checksum, decode, diskcache file read): hidden states in {through * 1e3:.1f} ms")


if __name__ == "__main__":
    main()
