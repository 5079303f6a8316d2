import threading

import numpy as np
import pytest
import torch

from analysis.cores import WORKERS, each_on_every_core, gram64, on_every_core


class Stop(Exception):
    pass


def test_every_item_runs_once_with_its_cores_scratch_and_a_pause_before_each_later_group():
    done, pauses, lock = [], [], threading.Lock()

    def work(i, scratch):
        with lock:
            done.append(i)
            scratch.append(i)

    def pause():
        with lock:
            pauses.append(len(done))

    each_on_every_core(work, 37, list, pause, every=8)
    assert sorted(done) == list(range(37))
    assert len(pauses) == 4  # before items 8, 16, 24 and 32
    assert all(8 * (g + 1) - WORKERS < seen <= 8 * (g + 1) for g, seen in enumerate(pauses))  # a group's items begun


def test_without_a_pause_every_item_runs_and_nothing_waits():
    done = []
    each_on_every_core(lambda i, _: done.append(i), 5)
    assert sorted(done) == list(range(5))


def test_work_a_pause_lets_run_on_every_core_finds_the_threads_free():
    """A preview that takes the cores inside the exact run's pause: no thread of the pool is held by the run."""
    inside = []

    def pause():
        inside.append(on_every_core(lambda x: x * 2, range(4 * WORKERS)))

    runner = threading.Thread(target=each_on_every_core, args=(lambda i, _: None, 20, lambda: None, pause, 4))
    runner.start()
    runner.join(timeout=30)
    assert not runner.is_alive()
    assert len(inside) == 4 and inside[0] == [2 * x for x in range(4 * WORKERS)]


def test_a_pause_that_raises_stops_the_items_after_it():
    done = []

    def pause():
        raise Stop

    with pytest.raises(Stop):
        each_on_every_core(lambda i, _: done.append(i), 40, pause=pause, every=10)
    assert sorted(done) == list(range(10))


def test_an_items_error_is_raised_and_no_later_group_starts():
    done = []

    def work(i, _):
        if i == 3:
            raise ValueError("item 3")
        done.append(i)

    with pytest.raises(ValueError, match="item 3"):
        each_on_every_core(work, 40, pause=lambda: None, every=10)
    assert max(done) < 10 + WORKERS


@pytest.mark.parametrize("rows, block_rows", [(1, 64), (700, 64), (700, 1000), (64 * WORKERS * 3 + 5, 64)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_gram64_equals_the_float64_product_over_any_split_into_blocks(rows, block_rows, dtype):
    """One block, a short last block, fewer blocks than cores and several blocks a core, on every core or on the one
    whose sums fit: X^T X of the float64 rows."""
    x = torch.randn(rows, 24, generator=torch.Generator().manual_seed(rows)).to(dtype)
    plain = x.to(torch.float64).numpy()
    for sums_bytes in (1 << 30, 1):
        gram = gram64(x, block_bytes=block_rows * 24 * 8, sums_bytes=sums_bytes)
        assert gram.dtype == torch.float64 and gram.shape == (24, 24)
        np.testing.assert_allclose(gram.numpy(), plain.T @ plain, rtol=1e-12, atol=1e-12)
