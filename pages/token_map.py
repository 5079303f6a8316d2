"""Token map: one layer's hidden states after CCR in 2-D (UMAP; its preview, the top two PCs, first), coloured
per token."""

import streamlit as st

from analysis.results.collections import COLOURINGS
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.widgets import ccr_slider, layer_slider

view = sidebar()
st.title("Token map")
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    n_entries = compute.states(view, loaded).value.n_layers
controls = st.columns(3)
layer, ccr = layer_slider(n_entries, controls[0]), ccr_slider(controls[1])
colour_by = controls[2].radio("Colour", COLOURINGS)
with compute.friendly_errors():  # the stored UMAP, else the PC plane now and the UMAP after it
    mapped = compute.stored_token_map(view, loaded, layer, ccr) or compute.preview_token_map(view, loaded, layer, ccr)
chart(mapped.figure(colour_by), mapped.table(), "token-map", mapped.describe())
view_state_button(view, layer=layer, ccr=ccr)
compute.page_drawn()
compute.background([compute.token_map_task(view, loaded, layer, ccr)] if mapped.preview else [])
