"""A visitor's move after the background's fill, with the fill pushing values out of the engine's memory and not.

At d = 2048 (a Pythia-1B shape): the visitor's exact run at k = 1024, CCR-3; the background's exact run of a nearby
setting (k = 512); then the visitor's move to CCR-10 at k = 1024, which needs the candidate bases at k = 1024 again
(847 MB). Prints each step's seconds with the fill using the memory as the visitor does and modestly
(``ModestMemory``, as the dashboard's fill does), alternating, in one run; the memory is the default (1 GiB on a CPU).
Gaussian states, a random unembedding: the time does not depend on the values.

Usage: python bench/background_fill.py [--layers 2] [--n 512] [--repeats 2]   (as on a laptop: bench/laptop.py first)
"""

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# isort: off
import analysis  # noqa: E402, F401  (first: its OpenMP setting must precede torch, as in the app)
# isort: on
import numpy as np  # noqa: E402
import torch  # noqa: E402

from analysis.geometry.pga import pga_sweep  # noqa: E402
from analysis.geometry.readout import readout_basis  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from analysis.runs.settings import pga_settings  # noqa: E402
from analysis.storage.memory import EngineMemory, ModestMemory, default_limit_mb  # noqa: E402

D, VOCAB = 2048, 8192


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--repeats", type=int, default=2)
    args = parser.parse_args()
    print(cpu_description())
    states = np.random.default_rng(0).standard_normal((args.layers, args.n, D), dtype=np.float32)
    basis = readout_basis(torch.randn(VOCAB, D, generator=torch.Generator().manual_seed(0)))
    print(f"d = {D}, N = {args.n}, {args.layers} layers, engine memory {default_limit_mb()} MB")
    moves = {"as the visitor's": [], "modest": []}
    for _ in range(args.repeats):
        for name, fill_memory in (("as the visitor's", lambda memory: memory), ("modest", ModestMemory)):
            memory = EngineMemory(default_limit_mb() * 2**20)
            seconds = []
            for k, ccr, used in ((1024, 3, memory), (512, 3, fill_memory(memory)), (1024, 10, memory)):
                start = time.perf_counter()
                pga_sweep(states, basis, pga_settings(D, (k,), (ccr,)), memory=used)
                seconds.append(time.perf_counter() - start)
            moves[name].append(seconds[2])
            print(f"fill's memory {name:16}: visitor k = 1024, CCR-3 {seconds[0]:6.2f} s; "
                  f"fill k = 512 {seconds[1]:6.2f} s; visitor's move to CCR-10 {seconds[2]:6.2f} s")
    plain, modest = min(moves["as the visitor's"]), min(moves["modest"])
    print(f"the visitor's move after the fill: {plain:.2f} s against {modest:.2f} s with a modest fill "
          f"({plain / modest:.1f}x)")


if __name__ == "__main__":
    main()
