"""Work on every core: compiled kernels that release the GIL (numba ``nogil``) and BLAS calls, run by one shared pool
of threads; and BLAS held to one thread while they do."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from functools import cache

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
