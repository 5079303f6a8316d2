"""The one routing switch the ``pages/`` folder needs.

A folder named ``pages/`` beside the main script makes Streamlit start in its older router, which
runs a requested page (``/readout``) directly, without ``app.py``, until some run calls
``st.navigation``. :func:`route_through_app` (called first by every page, through the sidebar)
switches the router over and reruns, so the page is served through the frame with its titles and
icons.
"""

import streamlit as st
from streamlit.runtime.pages_manager import PagesManager


def route_through_app() -> None:
    """Make sure ``app.py``'s ``st.navigation`` routes this run."""
    if PagesManager.uses_pages_directory:
        PagesManager.uses_pages_directory = False
        st.rerun()
