"""numba's compiled code, cached on disk wherever the process can write.

numba caches a function beside its source (``__pycache__``) or in the user's cache folder. Where it can write to
neither, as in a read-only install run by a user without a writable home (a locked-down container), its
``cache=True`` raises at import, the project's kernels and umap-learn's alike. Here the cache then goes to the
project's cache folder (``cache_dir() / "compiled"``), unless the user named a folder in ``NUMBA_CACHE_DIR``; where no
folder is writable at all, the code is compiled again in each process (a few seconds at its first call).
"""

from __future__ import annotations

import contextlib
import inspect

from numba import njit
from numba.core import config
from numba.core.caching import InTreeCacheLocator, UserProvidedCacheLocator, UserWideCacheLocator
from numba.core.dispatcher import Dispatcher

from analysis.storage.paths import cache_dir

NUMBA_PLACES = (UserProvidedCacheLocator, InTreeCacheLocator, UserWideCacheLocator)


def make_room(source: str) -> None:
    """Before numba caches the compiled functions of the file ``source``: where numba has no folder it can write for
    them and the user named none, its cache is pointed at the project's cache folder. (numba's places find the folder
    from the file alone; the function they are given only names an entry.)"""
    if not config.CACHE_DIR and not any(place.from_function(make_room, source) for place in NUMBA_PLACES):
        config.CACHE_DIR = str(cache_dir() / "compiled")


def cached(function: Dispatcher) -> Dispatcher:
    """``function``, a numba dispatcher, with its compiled code cached as the module says: where numba finds a folder
    for it, as numba caches it; else in the project's cache folder (:func:`make_room`), else not at all."""
    try:
        function.enable_caching()
    except RuntimeError:  # numba has no folder of its own for it
        make_room(inspect.getfile(function.py_func))
        with contextlib.suppress(RuntimeError):  # no folder writable at all
            function.enable_caching()
    return function


def kernel(**options):
    """``numba.njit(**options)``, its compiled code :func:`cached`."""
    return lambda function: cached(njit(**options)(function))
