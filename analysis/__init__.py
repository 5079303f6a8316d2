"""Readout geometry of language models: Subspace PGA and representational capacity.

The library never imports streamlit and never prints; the dashboard (``app.py``, ``pages/``) and
the CLI (``python -m analysis``) are thin layers over it.
"""

__version__ = "0.1.0"
