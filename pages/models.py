"""Across models: z against relative depth for several models, and whether two models arrange the
same texts alike (full spaces, readout subspaces, random subspaces)."""

import pandas as pd
import streamlit as st

from analysis.activations.pooling import text_chunks
from analysis.data.corpus import builtin_corpus
from analysis.geometry.convergence import convergence
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import demo_mode, sidebar


def from_sweep(found: list) -> None:
    """z against relative depth for the final stored checkpoint of each chosen series; no model loaded."""
    chosen = st.multiselect("Series from the result store (the final checkpoint of each)", found,
                            default=found[:6], format_func=lambda s: s.label)
    ks = sorted(set.intersection(*(set(s.ks) for s in chosen))) if chosen else []
    ccrs = sorted(set.intersection(*(set(s.ccrs) for s in chosen))) if chosen else []
    if not ks or not ccrs:
        st.warning("Choose series that share at least one k and one CCR depth.")
        st.stop()
    controls = st.columns(2)
    k, ccr = controls[0].selectbox("k", ks), controls[1].selectbox("CCR depth", ccrs)
    curves = {f"{s.name}@{s.results[-1].revision} · seed {s.spec['sampling']['seed']}": s.results[-1].at(k, ccr)
              for s in chosen}
    table = pd.DataFrame([{"series": name, "layer": x.layer, "relative_depth": x.layer / max(len(layers) - 1, 1),
                           "z": x.z} for name, layers in curves.items() for x in layers])
    chart(figures.z_by_relative_depth(curves), table, "z-relative-depth",
          f"From the result store: k = {k}, CCR-{ccr}; held-out loss: "
          + ", ".join(f"{s.name} {s.results[-1].loss:.2f}" for s in chosen))
    st.info("Convergence between two models needs the models themselves: switch Source to compute here.")
    st.stop()


view = sidebar()
st.title("Across models")
found = compute.sweep_source()
if found:
    from_sweep(found)
default = view.model + (f"@{view.revision}" if view.revision else "")
text = st.text_area("Models, one per line (a reference, optionally @revision)", value=default,
                    disabled=demo_mode(), help="Each model is loaded in turn; results are cached on disk.")
entries = [line.strip() for line in text.splitlines() if line.strip()][:6]
k = int(st.number_input("k (capped at d / 4 of each model)", 1, 8192, 100))
with compute.friendly_errors():
    widths = {entry: compute.card(compute.resolved(*entry.partition("@")[::2]))["d_model"] for entry in entries}
    k_of = {entry: min(k, max(1, width // 4)) for entry, width in widths.items()}
    summaries = {entry: compute.series(view, entry.split("@")[0], [entry.partition("@")[2]], k_of[entry], 1)[0]
                 for entry in entries}
curves = {name: result.layers for name, result in summaries.items()}
table = pd.DataFrame([{"model": name, "layer": x.layer, "relative_depth": x.layer / max(len(layers) - 1, 1),
                       "z": x.z} for name, layers in curves.items() for x in layers])
chart(figures.z_by_relative_depth(curves), table, "z-relative-depth",
      f"k = {', '.join(str(v) for v in k_of.values())}, CCR-1, N = {view.n_tokens}, seed {view.seed}; held-out loss: "
      + ", ".join(f"{name} {result.loss:.2f}" for name, result in summaries.items()))

st.subheader("Convergence between two models")
st.caption("Units: mean-pooled hidden states of the same ~400-character passages of the built-in text, so "
           "models with different tokenizers compare exactly the same items.")
if len(entries) < 2:
    st.info("Add a second model above to compare two models (a model against itself gives 1 everywhere).")
    entries = entries * 2
pick = st.columns(3)
model_a = pick[0].selectbox("Model A", entries, index=0)
model_b = pick[1].selectbox("Model B", entries, index=min(1, len(entries) - 1))
units = pick[2].slider("Passages", 20, 300, 120, step=20)
texts = text_chunks(builtin_corpus().text, units)
with compute.friendly_errors():
    pooled_a, basis_a = compute.pooled_of(view, model_a.split("@")[0], texts)
    pooled_b, basis_b = compute.pooled_of(view, model_b.split("@")[0], texts)
    results = convergence(pooled_a, pooled_b, basis_a, basis_b, k=100, n_null=20, seed=view.seed)
chart(figures.convergence_figure(results, len(pooled_a)),
      pd.DataFrame([{"layer_a": r.layer_a, "layer_b": r.layer_b, "full": r.full, "readout": r.readout,
                     "null_mean": r.null_mean, "null_std": r.null_std} for r in results]), "convergence",
      f"{len(texts)} passages, k = {min(100, pooled_a.shape[2], pooled_b.shape[2])}, 20 random subspaces.")
view_state_button(view, models=entries, k=k)
