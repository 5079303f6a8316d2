"""Readout geometry of language models: Subspace PGA and representational capacity.

The library never imports streamlit and never prints; the dashboard (``app.py``, ``pages/``) and
the CLI (``python -m analysis``) are thin layers over it.
"""

import os

# Before torch loads GNU OpenMP: its threads wait for the next parallel region by sleeping soon instead of
# spinning, so that the rank sorts on the other cores (the PGA engine interleaves both) are not starved:
# previews 35-45 % faster on 2 cores, forward passes unchanged (BENCHMARKS.md). A value set by the user wins.
os.environ.setdefault("GOMP_SPINCOUNT", "1000")

__version__ = "0.1.0"
