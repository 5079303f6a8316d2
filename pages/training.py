"""Across training: z and the PC1 angle as layer x checkpoint heatmaps, the loss beneath, and one
checkpoint's z curve against the final one. The checkpoints come from a finished sweep's result store,
or are computed here (each cached on disk; a new k or CCR depth is previewed first)."""

from pathlib import Path

import streamlit as st

from analysis.models.train_demo import partial
from analysis.results.collections import CheckpointSeries, DepthCurves
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.text import literal
from dashboard.view import ViewState, demo_mode
from dashboard.widgets import ccr_slider, k_slider, sweep_source


def spaced(labels: list[str], n: int = 6) -> list[str]:
    """Up to ``n`` labels spread evenly from the first to the last."""
    return sorted({labels[int(round(i * (len(labels) - 1) / (n - 1)))] for i in range(n)}, key=labels.index)


def from_sweep(found: list[CheckpointSeries]) -> tuple[CheckpointSeries, int, int]:
    """(series, k, ccr) from a stored series the user picks."""
    names = sorted({s.name for s in found})
    name = st.selectbox("Model", names)
    series = st.selectbox("Settings", [s for s in found if s.name == name], format_func=lambda s: s.label)
    controls = st.columns(2)
    k = controls[0].selectbox("k", series.ks)
    ccr = controls[1].selectbox("CCR depth", series.ccrs)
    labels = [r.revision or str(r.step) for r in series.results]
    return series.choose(st.multiselect("Checkpoints", labels, default=labels)), k, ccr


def computed_here(view: ViewState) -> tuple[CheckpointSeries | None, int, int]:
    """(series, k, ccr) computed for the sidebar's model on this machine."""
    with compute.friendly_errors():
        available = compute.checkpoints(view.model)
    if not available:
        st.info(literal(f"{view.model!r} has no training checkpoints.") + " Choose a checkpoint folder or a "
                "Pythia model in the sidebar, or train the offline demo series (two small GPT-NeoX widths; the "
                "progress bar gives the time left, measured on this machine).")
        if demo_mode():
            st.caption("Training is off in demo mode.")
        elif st.button("Train the demo series", type="primary"):
            with compute.friendly_errors():
                st.session_state["trained"] = compute.train_demo_series()
        for width, info in st.session_state.get("trained", {}).items():  # one button opens each series
            if st.button(f"Open the width-{width} series", key=f"open-{width}"):
                st.query_params.update(model=info["folder"], source="Checkpoint folder")
                st.rerun()
        st.stop()
    stopped = partial(Path(view.model)) if view.model.startswith(("/", ".", "~")) else None
    if stopped:
        st.warning(f"This series is partial: its training stopped after checkpoint-{stopped['last_checkpoint']} "
                   f"of {stopped['steps']} steps (the tab was closed or training was stopped). Train it again to "
                   "complete it.", icon=":material/warning:")
    labels = [c.revision for c in available]
    chosen = st.multiselect("Checkpoints (each is computed once and cached)", labels, default=spaced(labels))
    with compute.friendly_errors():
        d = compute.card(compute.resolved(view.model, labels[-1]))["d_model"]
    controls = st.columns(2)
    k, ccr = k_slider(d, controls[0]), ccr_slider(controls[1])
    if not chosen:
        return None, k, ccr
    ordered = sorted(chosen, key=labels.index)
    with compute.friendly_errors():  # stored, else a preview from the cached hidden states, else computed now
        found = (compute.stored_or_preview_series(view, view.model, ordered, k, ccr)
                 or compute.series(view, view.model, ordered, k, ccr))
    return found, k, ccr


view = sidebar()
st.title("Across training")
found = sweep_source()
series, k, ccr = from_sweep(found) if found else computed_here(view)
if series is None or not series.results:
    st.warning("Choose at least one checkpoint.")
    st.stop()
for result in series.results:
    if result.duplicate_of:
        st.warning(literal(f"{result.revision} has exactly the weights of {result.duplicate_of}")
                   + ": a flat stretch there is not a finding.")
table = series.table(k, ccr)
chart(series.heatmaps(k, ccr), table, "across-training", series.describe(k, ccr))
results = series.results
index = st.select_slider("Checkpoint to compare with the final one", [r.revision for r in results],
                         value=results[0].revision)
picked = next(r for r in results if r.revision == index)
pair = DepthCurves({picked.revision: picked.at(k, ccr), f"{results[-1].revision} (final)": results[-1].at(k, ccr)})
chart(pair.figure(), pair.table(), "checkpoint-vs-final", series.describe(k, ccr))
view_state_button(view, k=k, ccr=ccr, checkpoints=[r.revision for r in results])
if series.preview:  # the exact series (each checkpoint from its cached states); a newer move stops it
    with compute.friendly_errors():
        compute.series(view, view.model, [r.revision for r in results], k, ccr)
    st.rerun()
