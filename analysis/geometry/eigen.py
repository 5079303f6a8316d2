"""The top eigenpairs of a symmetric matrix by LAPACK's tridiagonal route, compiled so that it runs without the GIL.

``top_eigh(a, r)``: the reduction to tridiagonal form once (``dsytrd``), every eigenvalue from it (``dsterf``), the
top r vectors of the tridiagonal matrix by MRRR (``dstemr``), turned back by the reduction's reflectors
(``dormtr``): what ``eigh`` does minus its n - r vectors and their back-transform. The routines are scipy's LAPACK,
called from numba through ``scipy.linalg.cython_lapack``: scipy's Python wrappers of them hold the GIL, so two
layers' PCAs on two cores took as long as one after the other (31 layers at n = 512 on 2 AVX2 cores: 0.52 s
through scipy's wrappers, 0.26 s here). numba caches the compiled code on disk, as for the rank kernels.
"""

from __future__ import annotations

import llvmlite.binding as llvm
import numpy as np
from numba import types
from numba.extending import get_cython_function_address

from analysis.compiled import kernel


def _routine(name: str, arguments: int) -> types.ExternalFunction:
    """scipy's LAPACK routine ``name``, every argument a pointer (Fortran's convention), under a name of its own."""
    symbol = f"readout_geometry_{name}"
    llvm.add_symbol(symbol, get_cython_function_address("scipy.linalg.cython_lapack", name))
    return types.ExternalFunction(symbol, types.void(*[types.voidptr] * arguments))


_dsytrd = _routine("dsytrd", 10)
_dsterf = _routine("dsterf", 4)
_dstemr = _routine("dstemr", 21)
_dormtr = _routine("dormtr", 13)

_LOWER, _VECTORS, _BY_INDEX, _AS_IS = (np.uint8(ord(c)) for c in "LVIN")


@kernel(nogil=True)
def top_eigh(a, top):
    """(every eigenvalue ``[n]`` ascending, the top ``top`` eigenvectors as rows ``[top, n]`` ascending, LAPACK's info:
    nonzero when a routine failed) of a symmetric float64 ``a`` ``[n, n]``, which is overwritten. ``a`` is read as
    Fortran reads it (its transpose, the same matrix) and ``top`` <= n."""
    n = a.shape[0]
    size, lwork, info, found = (np.full(1, n, np.int32), np.full(1, -1, np.int32), np.zeros(1, np.int32),
                                np.zeros(1, np.int32))
    chars = np.array([_LOWER, _VECTORS, _BY_INDEX, _AS_IS], np.uint8)
    d, e, tau, query = np.empty(n), np.empty(n), np.empty(max(n - 1, 1)), np.empty(1)
    for _ in range(2):  # the workspace's size, then the reduction
        work = query if lwork[0] == -1 else np.empty(max(lwork[0], 1))
        _dsytrd(chars[0:].ctypes, size.ctypes, a.ctypes, size.ctypes, d.ctypes, e.ctypes, tau.ctypes, work.ctypes,
                lwork.ctypes, info.ctypes)
        lwork[0] = int(query[0])
    values, off = d.copy(), e.copy()  # dsterf and dstemr each overwrite the tridiagonal matrix
    if info[0] == 0:
        _dsterf(size.ctypes, values.ctypes, off.ctypes, info.ctypes)
    vectors = np.empty((top, n))  # Fortran's [n, top]
    if info[0] != 0:
        return values, vectors, info[0]
    first, last, columns = np.full(1, n - top + 1, np.int32), size.copy(), np.full(1, top, np.int32)
    bounds, w, support, tryrac = np.zeros(2), np.empty(n), np.empty(2 * top, np.int32), np.ones(1, np.int32)
    lwork[0], liwork, iquery = -1, np.full(1, -1, np.int32), np.zeros(1, np.int32)
    for _ in range(2):
        work = query if lwork[0] == -1 else np.empty(max(lwork[0], 1))
        iwork = iquery if liwork[0] == -1 else np.empty(max(liwork[0], 1), np.int32)
        _dstemr(chars[1:].ctypes, chars[2:].ctypes, size.ctypes, d.ctypes, e.ctypes, bounds[0:].ctypes,
                bounds[1:].ctypes, first.ctypes, last.ctypes, found.ctypes, w.ctypes, vectors.ctypes, size.ctypes,
                columns.ctypes, support.ctypes, tryrac.ctypes, work.ctypes, lwork.ctypes, iwork.ctypes,
                liwork.ctypes, info.ctypes)
        lwork[0], liwork[0] = int(query[0]), iquery[0]
    if info[0] != 0 or found[0] != top:
        return values, vectors, max(info[0], 1)
    lwork[0] = -1
    for _ in range(2):  # the vectors times the reduction's Q, from the left
        work = query if lwork[0] == -1 else np.empty(max(lwork[0], 1))
        _dormtr(chars[0:].ctypes, chars[0:].ctypes, chars[3:].ctypes, size.ctypes, columns.ctypes, a.ctypes,
                size.ctypes, tau.ctypes, vectors.ctypes, size.ctypes, work.ctypes, lwork.ctypes, info.ctypes)
        lwork[0] = int(query[0])
    return values, vectors, info[0]
