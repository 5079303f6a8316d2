"""Streamlit glue shared by the pages: the sidebar state and cached calls into ``analysis``.

Pages stay thin: they read the state, call a cached function here, and draw the figure.
"""
