"""Across training: z and the PC1 angle as layer x checkpoint heatmaps, the loss beneath, and one
checkpoint's z curve against the final one. The checkpoints come from a finished sweep's result store,
or are computed here (each cached on disk)."""

import pandas as pd
import streamlit as st

from analysis.geometry.pga import default_k
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import ViewState, remember, sidebar, url_int


def spaced(labels: list[str], n: int = 6) -> list[str]:
    """Up to ``n`` labels spread evenly from the first to the last."""
    return sorted({labels[int(round(i * (len(labels) - 1) / (n - 1)))] for i in range(n)}, key=labels.index)


def from_sweep(found: list):
    """(results, k, ccr, caption) from a stored series the user picks."""
    names = sorted({s.name for s in found})
    name = st.selectbox("Model", names)
    options = [s for s in found if s.name == name]
    series = st.selectbox("Settings", options, format_func=lambda s: s.label)
    controls = st.columns(2)
    k = controls[0].selectbox("k", series.ks)
    ccr = controls[1].selectbox("CCR depth", series.ccrs)
    labels = [r.revision or str(r.step) for r in series.results]
    chosen = st.multiselect("Checkpoints", labels, default=labels)
    spec = series.spec
    caption = (f"From the result store: N = {spec['sampling']['n_tokens']}, k = {k}, CCR-{ccr}, "
               f"R = {spec['settings']['n_null']}, seed {spec['sampling']['seed']}, {spec['dtype']}; loss on "
               f"{spec['loss_windows']} held-out windows of the same text.")
    return [r for r, label in zip(series.results, labels, strict=True) if label in chosen], k, ccr, caption


def computed_here(view: ViewState):
    """(results, k, ccr, caption) computed for the sidebar's model on this machine."""
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
    chosen = st.multiselect("Checkpoints (each is computed once and cached)", labels, default=spaced(labels))
    with compute.friendly_errors():
        d = compute.card(compute.resolved(view.model, labels[-1]))["d_model"]
    controls = st.columns(2)
    k = controls[0].number_input("k", 1, d, min(max(url_int("k", default_k(d)), 1), d))
    ccr = controls[1].select_slider("CCR depth", list(range(11)), value=min(max(url_int("ccr", 1), 0), 10))
    remember(k=k, ccr=ccr)
    if not chosen:
        return [], int(k), ccr, ""
    with compute.friendly_errors():
        results = compute.series(view, view.model, sorted(chosen, key=labels.index), int(k), ccr)
    caption = (f"N = {view.n_tokens}, k = {k}, CCR-{ccr}, R = 100, seed {view.seed}; loss on 16 held-out windows "
               "of the same text.")
    return results, int(k), ccr, caption


view = sidebar()
st.title("Across training")
found = compute.sweep_source()
results, k, ccr, caption = from_sweep(found) if found else computed_here(view)
if not results:
    st.warning("Choose at least one checkpoint.")
    st.stop()
for result in results:
    if result.duplicate_of:
        st.warning(f"{result.revision} has exactly the weights of {result.duplicate_of}: a flat stretch there is "
                   "not a finding.")
table = pd.DataFrame([{"step": r.step, "revision": r.revision, "identity": r.identity, "duplicate_of": r.duplicate_of,
                       "loss": r.loss, "layer": x.layer, "z": x.z, "pc1_angle_deg": x.pc1_angle_deg}
                      for r in results for x in r.at(k, ccr)])
chart(figures.checkpoint_heatmaps(results, k, ccr), table, "across-training", caption)
index = st.select_slider("Checkpoint to compare with the final one", [r.revision for r in results],
                         value=results[0].revision)
picked = next(r for r in results if r.revision == index)
chart(figures.z_by_relative_depth({f"{picked.revision}": picked.at(k, ccr),
                                   f"{results[-1].revision} (final)": results[-1].at(k, ccr)}),
      table[table.revision.isin([picked.revision, results[-1].revision])], "checkpoint-vs-final")
view_state_button(view, k=k, ccr=ccr, checkpoints=[r.revision for r in results])
