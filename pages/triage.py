"""Triage: the model card and the verdict at a glance (PGA at k = 100, CCR-1; epsilon; capacity)."""

import pandas as pd
import streamlit as st

from analysis.capacity.formulas import CLASS_NOTES
from analysis.geometry.pga import default_k
from analysis.geometry.verdict import verdict, worst_late_layer
from analysis.results.figures import z_by_layer
from dashboard import compute
from dashboard.export import chart, provenance, view_state_button
from dashboard.state import sidebar

view = sidebar()
st.title("Triage")
with compute.friendly_errors():
    ref = compute.resolved(view.model, view.revision)
    info = compute.card(ref)
st.subheader(info["name"] + (f" @ {info['revision']}" if info["revision"] else ""))
cols = st.columns(5)
cols[0].metric("Architecture", info["architecture"].removesuffix("ForCausalLM"))
cols[1].metric("Blocks", info["n_layers"])
cols[2].metric("d_model", info["d_model"])
cols[3].metric("Vocabulary", f"{info['vocab_size']:,}")
cols[4].metric("Embeddings", "tied" if info["tied_embeddings"] else "untied")
st.caption(f"Weights loaded: `{info['identity']}` ({info['kind']}"
           + (f", {len(info['checkpoints'])} checkpoints" if info["checkpoints"] else "") + ")")

k = default_k(info["d_model"])
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    results = compute.pga(view, loaded, k, 1)
    worst = worst_late_layer(results)
    deeper = compute.pga(view, loaded, k, 5, [worst.layer])[0] if worst else None
    stats, _ = compute.stats(view)
    summary = verdict(results, deeper, compute.capacity(stats.d, stats.epsilon))
    _, hidden_provenance = compute.states(view, loaded)

n = results[0].n_tokens
st.markdown(f"#### Verdict (k = {k}, CCR-1, N = {n}, R = 100, seed {view.seed})")
cols = st.columns(4)
cols[0].metric(f"Peak z (layer {summary.peak.layer})", f"{summary.peak.z:.1f}")
cols[1].metric(f"Lowest z (layer {summary.lowest.layer})", f"{summary.lowest.z:.1f}")
regime_text = {"detour": "detour: late layers collapse below the null band",
               "direct": "direct: late layers stay aligned", "mixed": "mixed: late layers inside the band"}
cols[2].metric("Regime", summary.regime, regime_text[summary.regime], delta_color="off", delta_arrow="off")
if summary.worst_late_deeper_ccr is not None:
    cols[3].metric(f"CCR-5 at layer {summary.worst_late.layer}", f"{summary.worst_late_deeper_ccr.z:.1f}",
                   f"{summary.worst_late_deeper_ccr.z - summary.worst_late.z:+.1f} vs CCR-1")
report = summary.capacity
cols = st.columns(4)
cols[0].metric("epsilon (embedding)", f"{stats.epsilon:.4f}", f"mu {stats.mu:.3f}, sigma {stats.sigma:.3f}",
               delta_color="off", delta_arrow="off")
cols[1].metric("Class", report.model_class)
capacity_text = "indeterminate" if report.model_class == "Class 1" else f"{report.capacity['full']:.3g}"
cols[2].metric("Capacity (full form)", capacity_text,
               "extrapolated" if report.extrapolated and report.model_class != "Class 1" else None,
               delta_color="off", delta_arrow="off")
cols[3].metric("Capacity (JL, C = 3.03)", "indeterminate" if report.model_class == "Class 1"
               else f"{report.capacity['jl_fitted']:.3g}")
st.caption(CLASS_NOTES[report.model_class])

table = pd.DataFrame([{"layer": r.layer, "z": r.z, "z_low": r.z_interval[0], "z_high": r.z_interval[1],
                       "rho_readout": r.rho_readout, "p_value": r.p_value, "pc1_angle_deg": r.pc1_angle_deg}
                      for r in results])
chart(z_by_layer({"CCR-1": results}), table, "triage-z",
      f"N = {n} tokens, {results[0].n_pairs:,} pairs, k = {k}, R = 100 random subspaces, seed {view.seed}, "
      f"model {ref.label}, {loaded.spec['dtype']}. " + provenance(hidden_provenance, "Hidden states"))
view_state_button(view)
