"""PGA sweep: the project's batched torch path vs a plain reference, the sort bounds, the preview.

One run, same data: 31 layers of synthetic states (the built-in model's stack), N = 512, d = 576,
k = 100, R = 100 (CCR-1).
- reference: per layer, numpy/scipy cosine distances (``pdist``) and ``scipy.stats.spearmanr`` for
  the readout and each null subspace, one at a time;
- sort bounds: sorting (R + 1) x n_pairs float32 values per layer, the floor for any comparison-sort
  rank statistic over all pairs (the engine ranks by a radix sort instead): with ``torch.sort``, and with
  numpy's key sort of 64-bit keys, the fastest comparison sort here;
- the machine's floor: the sweep's matmuls (each subspace's projection [N, d] x [d, k] and Gram matrix
  [N, k] x [k, N], and the full space's Gram matrix) at the GEMM rate measured here on a matmul of the
  projection's shape, plus one linear pass (a copy into memory already touched) over each subspace's pair values;
  the exact sweep is reported as a multiple of it;
- the exact sweep: the best of three runs, each from fresh engine memory (on a virtual machine the first run also pays
  for the host's first touch of the process's memory, seconds a GiB), each run again with only the layers' PCAs
  remembered (as the app's exact run after a slider move finds them: stored beside the hidden states, with the digests
  of their rows, so that no layer is hashed again: every sweep here names its states as the app does), each followed
  by a measure of the floor, so that a host whose speed drifts is seen in the ratios of the runs as well as in best
  against best;
- preview: the same sweep on ``preview_settings`` (the first 30 null draws, fewer above d x k = 2^18; above k = 16
  only the pairs inside blocks of 128 tokens), each layer's PCA not yet remembered, and again remembered (a slider
  move on states already analysed);
- warm slider: one layer recomputed for a new k from states already in memory;
- k = 1: the exact sweep where every cosine is -1, 0 or +1 (ranked by counting its tie runs), each layer's PCA
  remembered;
- moves (``--moves``): the app's order of work after the exact curve of k, CCR-1, in the engine: each move's preview,
  then its exact sweep in the same memory (which starts from the projections the exact curve and the preview left,
  and up to k = 16 from the rhos of the subspaces the preview scored on every pair),
  against the same exact sweep with only the layers' PCAs remembered (the CLI's): how much the preview delays the
  exact curve (goal: at most 10 %); each the best of two runs from the same memory. Up to k = 16, where the previews
  made ahead score every pair, also the preview the page makes itself when none was made ahead (on blocks).
Usage: python bench/pga.py [--layers 31] [--n 512] [--d 576] [--device auto] [--skip-reference] [--moves]
"""

import argparse
import sys
import time
from functools import partial
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

# isort: off
import analysis  # noqa: E402, F401  (first: its OpenMP setting must precede torch, as in the app)
# isort: on
import numpy as np  # noqa: E402
import scipy.stats  # noqa: E402
import torch  # noqa: E402
from scipy.spatial.distance import pdist  # noqa: E402

from analysis.geometry.pga import PGASettings, null_bases, pga_sweep  # noqa: E402
from analysis.geometry.ranks import sort_rows  # noqa: E402
from analysis.geometry.readout import readout_basis  # noqa: E402
from analysis.geometry.synthetic import planted_readout  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from analysis.runs.settings import block_preview, preview_layers, preview_settings  # noqa: E402
from analysis.storage.memory import EngineMemory  # noqa: E402


def seconds(work, device: torch.device) -> float:
    start = time.perf_counter()
    work()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def gemm_rate(n: int, d: int, width: int, device: torch.device) -> float:
    """FLOP/s of a float32 matmul [n, d] x [d, width] on this machine (best of ten: the rate it can reach)."""
    a, b = torch.randn(n, d, device=device), torch.randn(d, width, device=device)
    a @ b  # warm-up
    return 2 * n * d * width / min(seconds(lambda: a @ b, device) for _ in range(10))


def machine_floor(layers: int, n: int, d: int, k: int, subspaces: int, device: torch.device) -> tuple[float, dict]:
    """Seconds an exact sweep cannot beat here: its matmuls at the measured GEMM rate plus one linear pass over
    each subspace's pair values; and the parts."""
    rate = gemm_rate(n, d, subspaces * k, device)
    flops = 2 * n * d * subspaces * k + subspaces * 2 * n * n * k + 2 * n * n * d  # projections, Grams, full Gram
    pairs = torch.rand(subspaces, n * (n - 1) // 2, device=device)
    out = torch.empty_like(pairs).fill_(0.0)  # touched once: a pass, not the host's first touch of fresh memory
    pass_time = min(seconds(lambda: out.copy_(pairs), device) for _ in range(3))
    parts = {"GEMM GFLOP/s": rate / 1e9, "matmuls": layers * flops / rate, "linear pass": layers * pass_time}
    return parts["matmuls"] + parts["linear pass"], parts


STATES_KEY = "bench"  # the name the bench gives its states in the engine's memory, as the app names the states it has


# what the app's memory holds of states after their first sweep: each layer's PCA and the digest of its rows
PCAS = ("pca", "rows key")
# (k as a share of --k, CCR): the app bench's moves, down to the small k where a preview has the least to hand over
MOVES = ((1.0, 2), (0.64, 2), (0.64, 3), (0.32, 3), (0.16, 4), (0.08, 5), (0.04, 6), (2.88, 3))


def preview_delays(states, basis, k: int, device: torch.device, trials: int = 2) -> None:
    """Print, per move of :data:`MOVES` after the exact curve of k, CCR-1: its preview, its exact sweep after the
    preview, the two together against the exact sweep alone (each layer's PCA remembered, nothing else); each the
    best of ``trials`` runs from the same memory (one run's noise on this host was +-5 %, half the goal)."""
    exact = PGASettings(ks=(k,), ccrs=(1,))
    first = preview_settings(exact, basis.d).n_null + 1  # the subspaces a preview scores, as the app leaves them
    memory, sweep = EngineMemory(), partial(pga_sweep, states, basis, device=str(device), states_key=STATES_KEY)
    sweep(exact, memory=memory, for_previews=first)
    print(f"moves after the exact curve of k = {k}, CCR-1 (preview, then the exact sweep after it, against the exact "
          f"sweep alone; each the best of {trials} runs)")
    n_layers, n_tokens = states.shape[:2]
    for share, c in MOVES:
        moved = PGASettings(ks=(round(share * k),), ccrs=(c,))
        alone = min(seconds(partial(sweep, moved, memory=memory.copy(PCAS)), device) for _ in range(trials))
        ahead = preview_settings(moved, basis.d)
        # the preview made ahead (the app's order after a look, the exact sweep after it); where it differs, also the
        # page's own (no look): the exact run at a few layers and the exact run of the others after it, or on blocks
        kinds = [(f"k = {moved.ks[0]:3}, CCR-{c}: ", partial(sweep, ahead), partial(sweep, moved))]
        few = preview_layers(moved, n_tokens, n_layers, n_layers // 2)
        if few is not None:
            rest = [layer for layer in range(n_layers) if layer not in few]
            kinds.append((f"    the page's own, exact at {len(few)} layers: ", partial(sweep, moved, layers=few),
                          partial(sweep, moved, layers=rest)))
        elif block_preview(moved, basis.d) != ahead:
            kinds.append(("    the page's own, on blocks: ", partial(sweep, block_preview(moved, basis.d)),
                          partial(sweep, moved)))
        left_by = []
        for label, previewed, exact_after in kinds:
            runs = []
            for _ in range(trials):
                trial = memory.copy()
                preview = seconds(partial(previewed, memory=trial, for_previews=first), device)
                after = seconds(partial(exact_after, memory=trial, for_previews=first), device)
                runs.append((preview + after, preview, after, trial))
            both, preview, after, left = min(runs, key=lambda run: run[0])
            print(f"  {label}preview {preview:.2f} s + exact after it {after:.2f} s = {both:.2f} s, exact alone "
                  f"{alone:.2f} s: the preview delays it by {100 * (both - alone) / alone:+.0f} %")
            left_by.append(left)
        memory = left_by[0]  # the next move starts where the preview made ahead left it


def reference_layer(states, top, nulls):
    x = states.astype(np.float64) - states.mean(0)
    u = np.linalg.svd(x, full_matrices=False)[2][0]
    x = x - np.outer(x @ u, u)
    full = pdist(x, "cosine")
    return [scipy.stats.spearmanr(full, pdist(x @ q, "cosine")).statistic for q in [top, *nulls]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--layers", type=int, default=31)
    parser.add_argument("--n", type=int, default=512)
    parser.add_argument("--d", type=int, default=576)
    parser.add_argument("--k", type=int, default=100)
    parser.add_argument("--n-null", type=int, default=100)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--skip-reference", action="store_true")
    parser.add_argument("--moves", action="store_true")
    args = parser.parse_args()
    print(cpu_description())  # as on an AVX2 laptop: python bench/laptop.py bench/<this script>
    layers = [planted_readout(args.n, args.d, args.k, vocab=2000, noise=1.0, seed=s) for s in range(args.layers)]
    states = np.stack([h for h, _ in layers])
    basis = readout_basis(layers[0][1])
    settings = PGASettings(ks=(args.k,), ccrs=(1,), n_null=args.n_null)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    pga_sweep(states[:1], basis, PGASettings(ks=(8,), n_null=2), device=str(device))  # warm-up
    # the states named as the app names its states: each layer's rows hashed once per engine memory
    sweep = partial(pga_sweep, states, basis, device=str(device), states_key=STATES_KEY)
    ours, runs, warm_runs, floors = [], [], [], []
    for _ in range(3):  # fresh engine memory each time; the first also pays the process's first touch of its memory
        ours.clear()
        memory = EngineMemory()
        runs.append(seconds(partial(lambda m: ours.extend(sweep(settings, memory=m)), memory), device))
        # as the app's exact run after a move: the layers' PCAs stored, nothing else
        warm_runs.append(seconds(partial(sweep, settings, memory=memory.copy(PCAS)), device))
        floors.append(machine_floor(args.layers, args.n, args.d, args.k, args.n_null + 1, device))  # the same minute
    t_ours = min(runs)
    floor, parts = min(floors, key=lambda found: found[0])

    n_pairs = args.n * (args.n - 1) // 2
    values = torch.rand(args.n_null + 1, n_pairs, device=device)
    t_sort = seconds(lambda: [torch.sort(values, dim=-1) for _ in range(args.layers)], device)
    t_keys = seconds(lambda: [sort_rows(values) for _ in range(args.layers)], device)
    fastest = min(t_sort, t_keys)

    quick, memory = preview_settings(settings, basis.d), EngineMemory()
    t_cold = seconds(lambda: sweep(quick, memory=memory), device)
    t_warm = seconds(lambda: sweep(quick, memory=memory), device)
    t_slider = seconds(lambda: pga_sweep(states, basis, PGASettings(ks=(args.k // 2,), ccrs=(1,), n_null=args.n_null),
                                         layers=[min(5, args.layers - 1)], device=str(device)), device)
    t_one = seconds(partial(sweep, PGASettings(ks=(1,), ccrs=(1,), n_null=args.n_null), memory=memory.copy(PCAS)),
                    device)

    print(f"{args.layers} layers, N = {args.n}, d = {args.d}, k = {args.k}, R = {args.n_null}, "
          f"{n_pairs} pairs, device {device}, torch threads {torch.get_num_threads()}")
    print(f"project sweep (exact):    {t_ours:8.2f} s   (best of {', '.join(f'{t:.2f}' for t in runs)} s)")
    print(f"sort bound, torch.sort:   {t_sort:8.2f} s   project = {t_ours / t_sort:.2f}x")
    print(f"sort bound, key sort:     {t_keys:8.2f} s   project = {t_ours / t_keys:.2f}x")
    print(f"project / fastest sort bound: {t_ours / fastest:.2f}x")
    print(f"machine floor:            {floor:8.2f} s   (best of {', '.join(f'{f:.2f}' for f, _ in floors)} s; matmuls "
          f"{parts['matmuls']:.2f} s at {parts['GEMM GFLOP/s']:.0f} GFLOP/s, one linear pass over the pairs "
          f"{parts['linear pass']:.2f} s)")
    each = [run / f for run, (f, _) in zip(runs, floors, strict=True)]
    print(f"exact sweep / machine floor: {t_ours / floor:.2f}x, best against best (goal <= 2x); each run against the "
          f"floor measured right after it: {', '.join(f'{r:.2f}x' for r in each)}")
    each = [run / f for run, (f, _) in zip(warm_runs, floors, strict=True)]
    print(f"exact sweep with each layer's PCA remembered (the app's exact run after a move): {min(warm_runs):.2f} s, "
          f"{min(warm_runs) / floor:.2f}x the floor; each run: {', '.join(f'{r:.2f}x' for r in each)}")
    pairs = "every pair" if quick.pair_blocks is None else f"{quick.pair_blocks}-token blocks"
    print(f"preview ({pairs}, R' = {quick.n_null}, "
          f"{quick.projection} projection): {t_cold:.2f} s, "
          f"{t_warm:.2f} s with each layer's PCA remembered ({t_ours / t_warm:.1f}x less than exact)")
    print(f"warm slider (1 layer, new k): {t_slider:.2f} s")
    print(f"exact sweep at k = 1 (every cosine -1, 0 or +1: the tie runs counted), each layer's PCA remembered: "
          f"{t_one:.2f} s")
    if args.moves:
        preview_delays(states, basis, args.k, device)
    if not args.skip_reference:
        nulls = null_bases(args.d, args.k, args.n_null, settings.seed)
        start = time.perf_counter()
        reference = [reference_layer(states[i], basis.top(args.k), nulls) for i in range(args.layers)]
        t_ref = time.perf_counter() - start
        gap = max(abs(r.rho_readout - ref[0]) for r, ref in zip(ours, reference, strict=True))
        print(f"reference (numpy+scipy):  {t_ref:8.2f} s   speed-up {t_ref / t_ours:.2f}x   "
              f"max |rho difference| {gap:.1e}")


if __name__ == "__main__":
    main()
