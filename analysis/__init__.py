"""Readout geometry of language models: Subspace PGA and representational capacity.

The library never imports streamlit and never prints; the dashboard (``app.py``, ``pages/``) and
the CLI (``python -m analysis``) are thin layers over it.
"""

import os

# Before torch loads GNU OpenMP: its threads wait for the next parallel region by sleeping soon instead of
# spinning, so that the rank sorts on the other cores (the PGA engine interleaves both) are not starved:
# previews 35-45 % faster on 2 cores, forward passes unchanged (BENCHMARKS.md). A value set by the user wins.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")
# Before numpy loads OpenBLAS: its BLAS on one thread. The engine puts its own work on every core (``cores``) and
# torch does its big products; a second OpenBLAS thread only spun between numpy's small calls. In the dashboard,
# whose work runs off the main thread, that spinning took 0.6 core-seconds of each ~1 s slider preview: previews drawn
# in 1.05-1.53 s, 0.77-0.94 s with one thread (BENCHMARKS.md). The one product it served, the readout basis's Gram
# sum, takes 0.49 s instead of 0.45 s. A value set by the user wins.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

__version__ = "0.1.0"
