"""Hidden-state extraction: the project's batched path vs a plain per-sequence forward, one run.

Both see the same 4096 tokens (32 windows of 128) of the built-in corpus on the built-in model.
The reference calls ``model(window, output_hidden_states=True)`` one window at a time, LM head
included, in float32 (what a plain ``from_pretrained`` gives), and gathers the same positions. The
project's path is timed in float32 and in its default dtype (bfloat16 on CPUs that compute it natively).
Usage: python bench/hidden_states.py [--model smollm2-135m] [--tokens 4096] [--device auto]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.activations.hidden import extract, token_sample  # noqa: E402
from analysis.data.corpus import Sampling, builtin_corpus  # noqa: E402
from analysis.models.devices import cpu_description  # noqa: E402
from analysis.models.loading import load  # noqa: E402
from analysis.models.refs import resolve  # noqa: E402
from analysis.storage.cache import ResultCache  # noqa: E402


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
    print(cpu_description())  # as on an AVX2 laptop: python bench/laptop.py bench/<this script>
    ref = resolve(args.model)
    plain = load(ref, device=args.device, dtype="float32")
    default = load(ref, device=args.device, dtype="auto")
    cache = ResultCache(tempfile.mkdtemp())
    sample = token_sample(plain, builtin_corpus(), Sampling(n_tokens=16 * (args.tokens // 128), per_window=16),
                          cache)
    tokens = sample.windows.size
    timings = {}
    for name, loaded in (("project, float32", plain), (f"project, default dtype ({default.spec['dtype']})", default)):
        extract(loaded, token_sample(loaded, builtin_corpus(), Sampling(n_tokens=16), cache))  # warm-up
        start = time.perf_counter()
        states = extract(loaded, sample, batch_size=args.batch_size).states
        timings[name] = (time.perf_counter() - start, states)
    start = time.perf_counter()
    theirs = reference(plain, sample)
    t_ref = time.perf_counter() - start
    print(f"model {ref.label} on {plain.device}, {tokens} tokens, torch threads {torch.get_num_threads()}")
    print(f"reference (per sequence, LM head, float32): {tokens / t_ref:8.0f} tokens/s  ({t_ref:.2f} s)")
    for name, (seconds, states) in timings.items():
        error = float(np.abs(states - theirs).max() / np.abs(theirs).max())
        print(f"{name:40s}: {tokens / seconds:8.0f} tokens/s  ({seconds:.2f} s)  speed-up {t_ref / seconds:.2f}x"
              f"  max |difference| / max |state| {error:.1e}")


if __name__ == "__main__":
    main()
