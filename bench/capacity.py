"""epsilon statistics of the built-in model's embedding (49152 x 576): closed form vs explicit pairwise
blocks, and the exact 300-bin histogram, in one run. Usage: python bench/capacity.py [--device auto]"""

import argparse
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.capacity.epsilon import cosine_histogram, cosine_stats, pairwise_stats_by_blocks  # noqa: E402
from analysis.models.refs import resolve  # noqa: E402
from analysis.models.weights import read_matrix  # noqa: E402


def timed(function):
    start = time.perf_counter()
    result = function()
    return result, time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="smollm2-135m")
    parser.add_argument("--device", default="auto")
    args = parser.parse_args()
    matrix = read_matrix(resolve(args.model, weights=False), "embedding").matrix
    closed, t_closed = timed(lambda: cosine_stats(matrix, args.device))
    blocks, t_blocks = timed(lambda: pairwise_stats_by_blocks(matrix, args.device))
    histogram, t_hist = timed(lambda: cosine_histogram(matrix, device=args.device))
    sampled, t_sampled = timed(lambda: cosine_histogram(matrix, sample_pairs=10_000_000, device=args.device))
    print(f"{args.model} embedding {tuple(matrix.shape)}, {closed.n_pairs:,} pairs, "
          f"torch threads {torch.get_num_threads()}")
    print(f"closed form:      {t_closed:7.2f} s   mu {closed.mu:.6f} sigma {closed.sigma:.6f} eps {closed.epsilon:.4f}")
    print(f"pairwise blocks:  {t_blocks:7.2f} s   mu {blocks.mu:.6f} sigma {blocks.sigma:.6f}")
    print(f"speed-up of the closed form: {t_blocks / t_closed:.1f}x")
    print(f"exact histogram (300 bins): {t_hist:.2f} s; histogram mean {histogram.mean:.4f}")
    print(f"sampled histogram (1e7 pairs): {t_sampled:.2f} s; mean {sampled.mean:.4f}")


if __name__ == "__main__":
    main()
