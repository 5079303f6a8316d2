"""Work on every core: compiled kernels that release the GIL (numba ``nogil``) and BLAS calls, run by one shared pool
of threads; and BLAS held to one thread while they do. :func:`gram64`: a float64 Gram matrix made so (on a GPU,
block by block)."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from contextlib import contextmanager
from functools import cache

import numpy as np
import torch
from threadpoolctl import ThreadpoolController

WORKERS = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
_POOL = ThreadPoolExecutor(WORKERS)
_BLAS_LIMIT = threading.Lock()  # guards the count of callers inside one_blas_thread and the limit they share
_inside = 0
_limiter = None


def on_every_core(task: Callable, parts: Sequence) -> list:
    """``[task(part) for part in parts]``, the parts spread over ``WORKERS`` threads."""
    return list(_POOL.map(task, parts))


def each_on_every_core(work: Callable[[int, object], None], count: int, scratch: Callable[[], object] = lambda: None,
                       pause: Callable[[], None] | None = None, every: int = 1) -> None:
    """``work(i, space)`` for ``i`` in ``0..count - 1``, each core taking the next ``i`` when it is free, with a
    ``space = scratch()`` of its own (made once per core). ``pause`` (the caller's pause point: where a page's more
    urgent work may take the cores), when given, is called on the calling thread before each group of ``every`` items
    after the first, as soon as a core is free for the group, not once every item of the one before has ended (that
    left a core idle half an item per group: 3 % of an exact sweep). A core that finds the next group not yet let in
    gives its thread back, so that the work a pause lets run finds the threads it needs. An error of ``pause`` or of an
    item is raised here once the items running have ended; no item starts after it."""
    gate = threading.Lock()
    following, allowed = 0, count if pause is None else every  # the next item; the items before ``allowed`` may start
    stop = False

    def worker(space):
        nonlocal following
        while True:
            with gate:
                if stop or following >= min(allowed, count):
                    return space
                i, following = following, following + 1
            work(i, space)

    running = {_POOL.submit(worker, scratch()) for _ in range(min(WORKERS, count))}
    try:
        while running:
            ended, running = wait(running, return_when=FIRST_COMPLETED)
            spaces = [future.result() for future in ended]
            if following >= count:
                continue
            if following >= allowed:  # the cores are at the next group: its pause first
                pause()
                with gate:
                    allowed += every
            running |= {_POOL.submit(worker, space) for space in spaces}
    except BaseException:
        with gate:
            stop = True
        wait(running)
        raise


@cache
def _blas() -> ThreadpoolController:
    return ThreadpoolController()  # the BLAS libraries loaded by the first use (numpy's and scipy's)


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """numpy's and scipy's BLAS on one thread inside: for BLAS calls made on every core at once, or for LAPACK beside
    torch, whose cores its idle threads would spin on. The limit is the process's and shared: the first caller in (on
    any thread) sets it and the last one out puts it back, so a task on every core may take it inside the caller's."""
    global _inside, _limiter
    with _BLAS_LIMIT:
        if not _inside:
            _limiter = _blas().limit(limits=1, user_api="blas")
        _inside += 1
    try:
        yield
    finally:
        with _BLAS_LIMIT:
            _inside -= 1
            if not _inside:
                _limiter.restore_original_limits()


def gram64(rows: torch.Tensor, device: torch.device | str = "cpu", block_bytes: int = 1 << 25,
           sums_bytes: int = 1 << 30) -> torch.Tensor:
    """``X^T X`` ``[d, d]`` in float64 on ``device`` of ``rows`` ``X`` ``[n, d]`` (any float dtype, anywhere), with no
    float64 copy of ``X``: blocks of rows, ``block_bytes`` each in float64. On a GPU the blocks are summed there one by
    one. On the CPU every core takes blocks in turn and sums its blocks' ``B^T B`` (numpy's symmetric rank-k update,
    half the multiplications of a product), then the cores' sums are added; as many cores as their sums and products
    (two ``[d, d]`` each) fit in ``sums_bytes``. numpy's BLAS is on one thread (``analysis``): one core made the 1B
    shape's 50,304 x 2,048 Gram in 4.5-5.1 s, two in 2.4-2.8 s."""
    d, device = rows.shape[1], torch.device(device)
    starts = range(0, len(rows), max(1, block_bytes // (8 * d)))
    if device.type != "cpu":
        gram = torch.zeros(d, d, dtype=torch.float64, device=device)
        for start in starts:
            block = rows[start:start + starts.step].to(device=device, dtype=torch.float64)
            gram += block.T @ block
        return gram
    cores = max(1, min(WORKERS, len(starts), sums_bytes // (2 * 8 * d * d)))

    def part(first: int) -> np.ndarray:
        gram = np.zeros((d, d))
        for start in starts[first::cores]:
            block = rows[start:start + starts.step].to("cpu", torch.float64).numpy()
            gram += block.T @ block
        return gram

    with one_blas_thread():
        parts = on_every_core(part, range(cores))
    total = parts[0]
    for other in parts[1:]:
        total += other
    return torch.from_numpy(total)
