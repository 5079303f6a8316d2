"""Across models: z against relative depth for several models (or checkpoints), and whether two of
them arrange the same texts alike (full spaces, readout subspaces, random subspaces)."""

import math

import streamlit as st

from analysis.results.collections import CheckpointSeries, DepthCurves
from analysis.runs.settings import DEFAULT_CCR, PAPER_K, ModelChoice, capped_k
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.view import demo_mode
from dashboard.widgets import sweep_source


def from_sweep(found: list[CheckpointSeries]) -> None:
    """z against relative depth for the final stored checkpoint of each chosen series; no model loaded."""
    chosen = st.multiselect("Series from the result store (the final checkpoint of each)", found, default=found,
                            format_func=lambda s: s.label)
    ks = sorted(set.intersection(*(set(s.ks) for s in chosen))) if chosen else []
    ccrs = sorted(set.intersection(*(set(s.ccrs) for s in chosen))) if chosen else []
    if not ks or not ccrs:
        st.warning("Choose series that share at least one k and one CCR depth.")
        st.stop()
    controls = st.columns(2)
    k, ccr = controls[0].selectbox("k", ks), controls[1].selectbox("CCR depth", ccrs)
    curves = DepthCurves({f"{s.name}@{s.results[-1].revision} · seed {s.spec['sampling']['seed']}":
                          s.results[-1].at(k, ccr) for s in chosen})
    chart(curves.figure(), curves.table(), "z-relative-depth",
          f"From the result store: k = {k}, CCR-{ccr}; held-out loss: "
          + ", ".join(f"{s.name} {s.results[-1].loss:.2f}" for s in chosen))
    st.info("Convergence between two models needs the models themselves: switch Source to compute here.")
    st.stop()


view = sidebar()
st.title("Across models")
found = sweep_source()
if found:
    from_sweep(found)
st.session_state.setdefault("models", view.choice.label)
if st.button("Width ladder", help="The models this server holds (the built-in model, the demo series once trained, "
                                  "the Hub models in its cache), ordered by d_model: the PGA paper's width rule "
                                  "(d_model <= 1024 detour, >= 2048 aligned) across models at hand."):
    with compute.friendly_errors():
        st.session_state["models"] = "\n".join(name for name, _ in compute.models_at_hand())
text = st.text_area("Models, one per line (a reference, optionally @revision)", key="models",
                    disabled=demo_mode(), help="Each model is loaded in turn; results are cached on disk.")
k = int(st.number_input("k (capped at d / 4 of each model)", 1, 8192, PAPER_K))
with compute.friendly_errors():
    choices = [ModelChoice.parse(line) for line in text.splitlines() if line.strip()]
    widths = {c.label: compute.card(compute.resolved(c.name, c.revision or ""))["d_model"] for c in choices}
    asked = {c.label: (c.name, [c.revision or ""], capped_k(k, widths[c.label]), DEFAULT_CCR) for c in choices}
    # stored, else a preview (each model's forward pass first, where its states are not cached), else computed now
    summaries = {label: compute.stored_or_preview_series(view, *args) or compute.series(view, *args)
                 for label, args in asked.items()}
curves = DepthCurves({label: series.results[0].layers for label, series in summaries.items()},
                     any(series.preview for series in summaries.values()))
losses = {label: "(follows with the exact curve)" if math.isnan(series.results[0].loss)  # a preview measures none
          else f"{series.results[0].loss:.2f}" for label, series in summaries.items()}
chart(curves.figure(), curves.table(), "z-relative-depth",
      "; ".join(f"{label}: {series.describe(series.ks[0], DEFAULT_CCR)}" for label, series in summaries.items())
      + " Held-out loss: " + ", ".join(f"{label} {loss}" for label, loss in losses.items()))
if curves.preview:  # the exact curves, from each model's cached states; a newer move stops them
    with compute.friendly_errors():
        for args in asked.values():
            compute.series(view, *args)
    st.rerun()

st.subheader("Convergence between two models")
st.caption("Units: mean-pooled hidden states of the same ~400-character passages of the built-in text, so "
           "models with different tokenizers compare exactly the same items.")
labels = [c.label for c in choices]
if len(labels) < 2:  # a model against itself gives 1 everywhere: nothing to compute
    st.info("Add a second model above (or the same model @ another checkpoint) to compare two.")
    view_state_button(view, models=labels, k=k)
    st.stop()
pick = st.columns(3)
model_a = pick[0].selectbox("Model A", labels, index=0)
model_b = pick[1].selectbox("Model B", labels, index=min(1, len(labels) - 1))
units = pick[2].slider("Passages", 20, 300, 120, step=20)
by_label = {c.label: c for c in choices}
with compute.friendly_errors():
    run = compute.convergence(view, by_label[model_a], by_label[model_b], units)
chart(run.figure(), run.table(), "convergence", run.describe())
view_state_button(view, models=labels, k=k)
