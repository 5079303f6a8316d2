"""Token map: one layer's hidden states after CCR in 2-D (UMAP), coloured per token."""

import numpy as np
import pandas as pd
import streamlit as st

from analysis.geometry.pga import default_k
from analysis.geometry.token_map import token_class
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import remember, sidebar, url_int

view = sidebar()
st.title("Token map")
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    hidden, provenance = compute.states(view, loaded)
    basis = compute.readout(loaded)
controls = st.columns(3)
layer = controls[0].slider("Layer", 0, hidden.n_layers - 1, min(max(url_int("layer", hidden.n_layers // 2), 0),
                                                               hidden.n_layers - 1))
ccr = controls[1].select_slider("CCR depth", list(range(11)), value=min(max(url_int("ccr", 1), 0), 10))
colour_by = controls[2].radio("Colour", ["projection on PC1", "share inside V_k", "token class"])
remember(layer=layer, ccr=ccr)
k = default_k(basis.d)
with compute.friendly_errors():
    mapped = compute.token_map(f"{provenance['spec']}|{layer}|{ccr}", hidden.layer(layer), basis.top(k), ccr,
                               view.seed)
sample, tokenizer = hidden.sample, loaded.tokenizer
tokens = [tokenizer.decode([int(t)]) for t in sample.token_ids]
contexts = [tokenizer.decode(sample.windows[r, max(0, c - 8):c + 1].tolist()) for r, c in
            zip(sample.rows, sample.cols, strict=True)]
hover = [f"<b>{t!r}</b><br>...{ctx}" for t, ctx in zip(tokens, contexts, strict=True)]
colour = {"projection on PC1": mapped["pc1"], "share inside V_k": mapped["share_in_readout"],
          "token class": np.array([token_class(t) for t in tokens])}[colour_by]
chart(figures.token_map_figure(mapped["coords"], colour, hover, colour_by),
      pd.DataFrame({"x": mapped["coords"][:, 0], "y": mapped["coords"][:, 1], "token": tokens,
                    "pc1": mapped["pc1"], "share_in_readout": mapped["share_in_readout"]}), "token-map",
      f"Layer {layer}, CCR-{ccr}, k = {k}, N = {len(tokens)}, UMAP seed {view.seed} (15 neighbours).")
view_state_button(view, layer=layer, ccr=ccr)
