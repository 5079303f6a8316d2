"""Hidden-state extraction: the project's batched path vs a plain per-sequence forward, one run.

Both see the same 4096 tokens (32 windows of 128) of the built-in corpus on the built-in model.
The reference calls ``model(window, output_hidden_states=True)`` one window at a time, LM head
included, and gathers the same positions. Prints tokens/s for both and the ratio.
Usage: python bench/hidden_states.py [--model smollm2-135m] [--tokens 4096] [--device auto]
"""

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.cache import ResultCache  # noqa: E402
from analysis.corpus import Sampling, builtin_corpus  # noqa: E402
from analysis.hidden import extract, token_sample  # noqa: E402
from analysis.loading import load  # noqa: E402
from analysis.refs import resolve  # noqa: E402


def reference(loaded, sample) -> np.ndarray:
    out = np.empty((loaded.anatomy.n_layers + 1, len(sample.rows), loaded.anatomy.d_model), np.float32)
    with torch.no_grad():
        for w, window in enumerate(sample.windows):
            hidden = loaded.model(torch.as_tensor(window)[None].to(loaded.device),
                                  output_hidden_states=True).hidden_states
            mine = np.flatnonzero(sample.rows == w)
            for layer, h in enumerate(hidden):
                out[layer, mine] = h[0, sample.cols[mine]].float().cpu().numpy()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--tokens", type=int, default=4096)
    parser.add_argument("--device", default="auto")
    parser.add_argument("--batch-size", type=int, default=8)
    args = parser.parse_args()
    loaded = load(resolve(args.model), device=args.device)
    n_windows = args.tokens // 128
    sampling = Sampling(n_tokens=16 * n_windows, window=128, per_window=16)
    import tempfile

    sample = token_sample(loaded, builtin_corpus(), sampling, ResultCache(tempfile.mkdtemp()))
    tokens = sample.windows.size
    extract(loaded, token_sample(loaded, builtin_corpus(), Sampling(n_tokens=16), ResultCache(tempfile.mkdtemp())))
    start = time.perf_counter()
    ours = extract(loaded, sample, batch_size=args.batch_size)
    t_ours = time.perf_counter() - start
    start = time.perf_counter()
    theirs = reference(loaded, sample)
    t_ref = time.perf_counter() - start
    error = float(np.abs(ours.states - theirs).max())
    print(f"model {loaded.ref.label} on {loaded.device}, {tokens} tokens, torch threads {torch.get_num_threads()}")
    print(f"project (batched, no LM head): {tokens / t_ours:8.0f} tokens/s  ({t_ours:.2f} s)")
    print(f"reference (per sequence, head): {tokens / t_ref:8.0f} tokens/s  ({t_ref:.2f} s)")
    print(f"speed-up: {t_ref / t_ours:.2f}x   max abs difference: {error:.2e}")


if __name__ == "__main__":
    main()
