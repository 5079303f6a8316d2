"""One sweep plan run by the local backend and by Ray on this machine, in one run: wall time of each, of
a rerun (everything stored), and which stored numbers are bit-identical between the two stores (Ray
tasks run one BLAS thread each, the local backend all cores: float64 summation order can differ).

The plan: both widths of the demo series (trained here first), every checkpoint, k = d / 4, CCR 0 and 1.
Each backend gets its own store and its own cache of intermediates, so neither reuses the other's work.
Usage: python bench/sweep.py [--steps 64] [--n-tokens 256] [--cpus 2]
"""

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from analysis.models.train_demo import DemoSettings, train_demo  # noqa: E402
from analysis.runs.backends import LocalBackend, RayBackend  # noqa: E402
from analysis.runs.plan import parse_plan  # noqa: E402
from analysis.runs.series import CHECKPOINT_RECORD, SERIES_NAMESPACE, SERIES_VERSION  # noqa: E402
from analysis.runs.sweep import run_sweep  # noqa: E402
from analysis.storage.store import ResultStore  # noqa: E402


def numbers(store: ResultStore) -> dict:
    """{(model, revision, layer, k, ccr, field): array} of every stored number, loss included."""
    found = {}
    for record in store.records(SERIES_NAMESPACE, SERIES_VERSION, CHECKPOINT_RECORD):
        value = record["value"]
        found[value["name"], value["revision"], "loss"] = np.asarray(value["loss"])
        for layer in value["layers"]:
            for field, number in layer.items():
                found[value["name"], value["revision"], layer["layer"], layer["k"], layer["ccr"], field] = \
                    np.asarray(number, dtype=float)
    return found


def compare(a: dict, b: dict) -> str:
    """Which stored numbers are bit-identical between two stores, and the largest difference."""
    assert a.keys() == b.keys(), "the stores hold different records"
    fields = {key[-1] for key in a}
    differing = sorted({key[-1] for key in a if not np.array_equal(a[key], b[key], equal_nan=True)})
    gap = max(float(np.nanmax(np.abs(a[key] - b[key]) / np.maximum(np.abs(a[key]), 1e-300))) for key in a)
    same = sorted(fields - set(differing))
    return (f"bit-identical: {', '.join(same)}; differing: {', '.join(differing) or 'none'} "
            f"(max relative difference {gap:.1e})")


def timed(plan, backend, store, cache: str) -> tuple[float, object]:
    start = time.perf_counter()
    report = run_sweep(plan, backend, store, cache_dir=cache)
    return time.perf_counter() - start, report


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=64)
    parser.add_argument("--n-tokens", type=int, default=256)
    parser.add_argument("--cpus", type=int, default=2)
    args = parser.parse_args()
    import ray

    root = Path(tempfile.mkdtemp())
    summary = train_demo(root / "demo", DemoSettings(steps=args.steps))
    plan = parse_plan({"models": [{"model": info["folder"], "revisions": "all"} for info in summary.values()],
                       "n_tokens": args.n_tokens, "ccr": [0, 1], "dtype": "float32"})
    local_store, ray_store = ResultStore(root / "local"), ResultStore(root / "ray")
    t_local, report = timed(plan, LocalBackend("cpu"), local_store, str(root / "cache-local"))
    t_local_again, _ = timed(plan, LocalBackend("cpu"), local_store, str(root / "cache-local"))
    start = time.perf_counter()
    ray.init(num_cpus=args.cpus, include_dashboard=False, log_to_driver=False)
    t_ray_start = time.perf_counter() - start
    t_ray, ray_report = timed(plan, RayBackend(), ray_store, str(root / "cache-ray"))
    t_ray_again, _ = timed(plan, RayBackend(), ray_store, str(root / "cache-ray"))
    ray.shutdown()
    jobs = len(report.outcomes)
    print(f"{jobs} jobs (2 widths x {jobs // 2} checkpoints), N = {args.n_tokens}, CCR 0 and 1, R = 100")
    print(f"local backend:  {t_local:7.1f} s   rerun {t_local_again:5.2f} s   ({report.count('computed')} computed)")
    print(f"ray ({args.cpus} CPUs):   {t_ray:7.1f} s   rerun {t_ray_again:5.2f} s   "
          f"({ray_report.count('computed')} computed; Ray start {t_ray_start:.1f} s not included)")
    print(f"ray / local: {t_ray / t_local:.2f}")
    print(compare(numbers(local_store), numbers(ray_store)))


if __name__ == "__main__":
    main()
