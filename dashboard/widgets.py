"""Page widgets shared by more than one page."""

from __future__ import annotations

import streamlit as st

from analysis.results.collections import CheckpointSeries
from analysis.storage.store import default_store_url
from dashboard.compute import friendly_errors, stored
from dashboard.view import remember, url_int

SOURCES = ("Sweep results", "Compute on this machine")


def sweep_source() -> list[CheckpointSeries] | None:
    """The stored sweep series when the page should show them (the default when the store has any);
    None to compute on this machine."""
    url = default_store_url()
    with friendly_errors():
        found = stored(url)
    if not found:
        return None
    choice = st.radio("Source", SOURCES, horizontal=True, index=min(max(url_int("computed", 0), 0), 1),
                      help=f"Sweep results: {len(found)} model x settings series in {url} (RG_STORE), read "
                           "without loading any model. Compute: the sidebar's model, on this machine.")
    remember(computed=SOURCES.index(choice))
    return found if choice == SOURCES[0] else None
