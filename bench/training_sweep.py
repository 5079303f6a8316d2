"""A training sweep over the offline demo series: time per checkpoint split into load, forward pass,
metrics and loss, and what is reused across checkpoints. Usage: python bench/training_sweep.py"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.data.corpus import Sampling, builtin_corpus  # noqa: E402
from analysis.models.train_demo import DemoSettings, train_demo  # noqa: E402
from analysis.runs.analyses import checkpoint_series  # noqa: E402
from analysis.runs.settings import Compute  # noqa: E402
from analysis.storage.cache import ResultCache  # noqa: E402

CPU = Compute(device="cpu")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=512)
    parser.add_argument("--n-tokens", type=int, default=512)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp())
    start = time.perf_counter()
    summary = train_demo(root, DemoSettings(steps=args.steps))
    print(f"train-demo: {time.perf_counter() - start:.1f} s for widths {list(summary)} x {args.steps} steps")
    cache = ResultCache(root / "cache")
    sampling = Sampling(n_tokens=args.n_tokens)
    for width, info in summary.items():
        start = time.perf_counter()
        series = checkpoint_series(info["folder"], None, builtin_corpus(), sampling, compute=CPU, cache=cache)
        total = time.perf_counter() - start
        results = series.results
        print(f"\nwidth {width}: {len(results)} checkpoints in {total:.1f} s ({series.describe(series.ks[0], 1)})")
        print("step    load  forward  metrics   loss   held-out loss")
        for r in results:
            s = r.seconds
            print(f"{r.step:5d} {s['load']:6.2f} {s['forward']:8.2f} {s['metrics']:8.2f} {s['loss']:6.2f}"
                  f"   {r.loss:.3f}")
        start = time.perf_counter()
        checkpoint_series(info["folder"], None, builtin_corpus(), sampling, compute=CPU, cache=cache)
        print(f"second run of the same sweep (all cached): {time.perf_counter() - start:.2f} s")
        moved = dict(ks=(series.ks[0] // 2,), ccrs=(2,))
        start = time.perf_counter()
        checkpoint_series(info["folder"], None, builtin_corpus(), sampling, **moved, compute=CPU, cache=cache,
                          preview=True)
        quick = time.perf_counter() - start
        start = time.perf_counter()
        checkpoint_series(info["folder"], None, builtin_corpus(), sampling, **moved, compute=CPU, cache=cache)
        print(f"a new k ({moved['ks'][0]}) and CCR (2), as the training page asks them (hidden states cached, no "
              f"model loaded): preview {quick:.2f} s, exact {time.perf_counter() - start:.2f} s")
    print("\nReused across checkpoints: the tokenised corpus (keyed by the tokenizer's definition, computed once "
          "per series) and the sampled positions (same seed and windows); the null bases are regenerated per "
          "checkpoint from the same seed.")


if __name__ == "__main__":
    main()
