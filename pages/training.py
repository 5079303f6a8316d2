"""Across training: z and the PC1 angle as layer x checkpoint heatmaps, the loss beneath, and one
checkpoint's z curve against the final one."""

import pandas as pd
import streamlit as st

from analysis import figures
from analysis.pga import default_k
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import remember, sidebar, url_int

view = sidebar()
st.title("Across training")
with compute.friendly_errors():
    available = compute.checkpoints(view.model)
if not available:
    st.info(f"{view.model!r} has no training checkpoints. Choose a checkpoint folder or a Pythia model in the "
            "sidebar, or train the offline demo series (two small GPT-NeoX widths, about two minutes).")
    if st.button("Train the demo series", type="primary"):
        with compute.friendly_errors():
            trained = compute.train_demo_series()
        for width, info in trained.items():
            st.success(f"Width {width}: {info['folder']}  (Source: Checkpoint folder)")
    st.stop()

labels = [c.revision for c in available]
spaced = sorted({labels[int(round(i))] for i in [j * (len(labels) - 1) / 5 for j in range(6)]}, key=labels.index)
chosen = st.multiselect("Checkpoints (each is computed once and cached)", labels, default=spaced)
with compute.friendly_errors():
    d = compute.card(compute.resolved(view.model, labels[-1]))["d_model"]
controls = st.columns(2)
k = controls[0].number_input("k", 1, d, min(max(url_int("k", default_k(d)), 1), d))
ccr = controls[1].select_slider("CCR depth", list(range(11)), value=min(max(url_int("ccr", 1), 0), 10))
remember(k=k, ccr=ccr)
if not chosen:
    st.warning("Choose at least one checkpoint.")
    st.stop()
chosen = sorted(chosen, key=labels.index)
with compute.friendly_errors():
    results = compute.series(view, view.model, chosen, int(k), ccr)
for result in results:
    if result.duplicate_of:
        st.warning(f"{result.revision} has exactly the weights of {result.duplicate_of}: a flat stretch there is "
                   "not a finding.")
table = pd.DataFrame([{"step": r.step, "revision": r.revision, "identity": r.identity, "duplicate_of": r.duplicate_of,
                       "loss": r.loss, "layer": x.layer, "z": x.z, "pc1_angle_deg": x.pc1_angle_deg}
                      for r in results for x in r.layers])
n = results[0].layers[0].n_tokens
chart(figures.checkpoint_heatmaps(results, int(k), ccr), table, "across-training",
      f"N = {n}, k = {k}, CCR-{ccr}, R = 100, seed {view.seed}; loss on {16} held-out windows of the same text.")
index = st.select_slider("Checkpoint to compare with the final one", [r.revision for r in results],
                         value=results[0].revision)
picked = next(r for r in results if r.revision == index)
chart(figures.z_by_relative_depth({f"{picked.revision}": picked.layers, f"{results[-1].revision} (final)":
                                   results[-1].layers}),
      table[table.revision.isin([picked.revision, results[-1].revision])], "checkpoint-vs-final")
view_state_button(view, k=int(k), ccr=ccr, checkpoints=chosen)
