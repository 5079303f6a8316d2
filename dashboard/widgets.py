"""Page widgets shared by more than one page: the k, CCR-depth and layer controls (their ranges and defaults
come from ``analysis.runs.settings``; each starts from the URL, writes itself back to it, and keeps one
identity, its key, whatever its starting value) and the sweep-results source."""

from __future__ import annotations

import streamlit as st

from analysis.geometry.pga import default_k
from analysis.results.collections import CheckpointSeries
from analysis.runs.settings import DEFAULT_CCR, ccr_depths, clamp_ccr, clamp_layer, k_grid, snap_k
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


def k_slider(d: int, where=st) -> int:
    """k on the grid ``k_grid(d)``, from the URL's ``k`` (snapped to the grid, said while it stays there)."""
    grid, asked = k_grid(d), url_int("k", default_k(d))
    k = where.select_slider("k (readout dimensions)", grid, value=snap_k(asked, grid), key="k",
                            help=f"Powers of two up to d / 2 = {d // 2} and the default {default_k(d)}; never d "
                                 "(at k = d every subspace keeps every distance and z is rounding noise).")
    if asked not in grid:  # said while the slider stays there, through the page's own reruns
        st.session_state["k from the link"] = (asked, snap_k(asked, grid))
    linked = st.session_state.get("k from the link")
    if linked and linked[1] == k:
        where.caption(f"k = {linked[0]} from the link is not on the slider's grid; showing k = {k}.")
    remember(k=k)
    return k


def ccr_slider(where=st) -> int:
    """The CCR depth, 0 to ``DEEPEST_CCR``, from the URL's ``ccr``."""
    ccr = where.select_slider("CCR depth (components removed)", ccr_depths(), key="ccr",
                              value=clamp_ccr(url_int("ccr", DEFAULT_CCR)))
    remember(ccr=ccr)
    return ccr


def layer_slider(n_entries: int, where=st) -> int:
    """A layer, 0 (embeddings) to ``n_entries - 1``, from the URL's ``layer`` (default: the middle one)."""
    layer = where.slider("Layer", 0, n_entries - 1, clamp_layer(url_int("layer", n_entries // 2), n_entries),
                         key="layer")
    remember(layer=layer)
    return layer
