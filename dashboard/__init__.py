"""Streamlit glue shared by the pages: the sidebar state and cached calls into ``analysis``.

Pages stay thin: they read the state, call a cached function here, and draw the figure. The library is
imported first, so that its thread settings (``analysis/__init__.py``) come before torch is loaded.
"""

import analysis  # noqa: F401
