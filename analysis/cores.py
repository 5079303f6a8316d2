"""Compiled kernels that release the GIL (numba ``nogil``), run on every core by one shared pool of threads."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import torch

WORKERS = max(1, min(torch.get_num_threads(), os.cpu_count() or 1))
_POOL = ThreadPoolExecutor(WORKERS)


def on_every_core(task: Callable, parts: Sequence) -> list:
    """``[task(part) for part in parts]``, the parts spread over ``WORKERS`` threads."""
    return list(_POOL.map(task, parts))
