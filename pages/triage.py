"""Triage: the model card and the verdict at a glance (PGA at the default k, CCR-1; epsilon; capacity)."""

import streamlit as st

from analysis.capacity.atlas import placement
from analysis.capacity.formulas import CLASS_NOTES
from analysis.results.glossary import explain, glossary
from analysis.results.report import report_file_name
from dashboard import compute
from dashboard.export import chart, provenance, view_state_button
from dashboard.sidebar import sidebar
from dashboard.text import literal

REGIME_TEXT = {"detour": "detour: late layers collapse below the null band",
               "direct": "direct: late layers stay aligned", "mixed": "mixed: late layers inside the band"}

view = sidebar()
st.title("Triage")
with compute.friendly_errors():
    ref = compute.view_ref(view)
    info = compute.card(ref)
st.subheader(literal(info["name"] + (f" @ {info['revision']}" if info["revision"] else "")))
cols = st.columns(5)
cols[0].metric("Architecture", literal(info["architecture"].removesuffix("ForCausalLM")))
cols[1].metric("Blocks", info["n_layers"])
cols[2].metric("d_model", info["d_model"])
cols[3].metric("Vocabulary", f"{info['vocab_size']:,}")
cols[4].metric("Embeddings", "tied" if info["tied_embeddings"] else "untied")
st.caption(literal(f"Weights loaded: {info['identity']} ({info['kind']}"
                   + (f", {len(info['checkpoints'])} checkpoints" if info["checkpoints"] else "") + ")"))

with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    exact = compute.stored_pga(view, loaded)
if exact is None:  # first answer: the curve's shape at once, then the exact curve and the verdict
    st.info("Verdict: computing the exact curve; the preview below shows its shape.", icon=":material/hourglass:")
    with compute.friendly_errors():
        preview = compute.preview_pga(view, loaded)
    chart(preview.z_figure(), preview.table(), "triage-z-preview", preview.describe() + ".")
    compute.page_drawn()
    with compute.friendly_errors():
        compute.pga(view, loaded)
    st.rerun()
with compute.friendly_errors():
    run = compute.triage(view, loaded)
summary, stats, pga = run.verdict, run.stats, run.pga
k, ccr = pga.settings.ks[0], pga.settings.ccrs[0]
st.markdown(f"#### Verdict (k = {k}, CCR-{ccr}, N = {pga.n_tokens}, R = {pga.settings.n_null}, "
            f"seed {pga.settings.seed})")
cols = st.columns(5)
cols[0].metric(f"Peak z (layer {summary.peak.layer})", f"{summary.peak.z:.1f}", help=explain("z"))
cols[1].metric(f"Lowest z (layer {summary.lowest.layer})", f"{summary.lowest.z:.1f}", help=explain("z"))
cols[2].metric("Regime", summary.regime, REGIME_TEXT[summary.regime], delta_color="off", delta_arrow="off",
               help=explain("regime"))
if summary.worst_late_deeper_ccr is not None:
    deeper = summary.worst_late_deeper_ccr
    cols[3].metric(f"CCR-{deeper.ccr} at layer {summary.worst_late.layer}", f"{deeper.z:.1f}",
                   f"{deeper.z - summary.worst_late.z:+.1f} vs CCR-{ccr}", help=explain("ccr"))
if summary.worst_late is not None:
    cols[4].metric(f"PC1 angle (layer {summary.worst_late.layer})", f"{summary.worst_late.pc1_angle_deg:.0f} deg",
                   help=explain("pc1"))
st.caption(" ".join(filter(None, (summary.explain_layers(), summary.explain_deeper(), summary.width_rule.describe()))))
report = summary.capacity
indeterminate = report.model_class == "Class 1"
cols = st.columns(4)
cols[0].metric("epsilon (embedding)", f"{stats.epsilon:.4f}", f"mu {stats.mu:.3f}, sigma {stats.sigma:.3f}",
               delta_color="off", delta_arrow="off", help=explain("epsilon"))
cols[1].metric("Class", report.model_class, help=explain("epsilon"))
cols[2].metric("Capacity (full form)", "indeterminate" if indeterminate else f"{report.capacity['full']:.3g}",
               "extrapolated" if report.extrapolated and not indeterminate else None,
               delta_color="off", delta_arrow="off", help=explain("capacity"))
cols[3].metric("Capacity (JL, C = 3.03)", "indeterminate" if indeterminate else f"{report.capacity['jl_fitted']:.3g}",
               help=explain("capacity"))
st.caption(CLASS_NOTES[report.model_class] + " " + placement(stats.d, stats.epsilon))
with st.expander("What the numbers mean"):
    for title, text in glossary().values():
        st.markdown(f"**{title}.** {text}")

chart(run.z_figure(), run.table(), "triage-z", pga.describe() + ". " + provenance(pga.provenance, "Hidden states"))
REPORT_HELP = ("One self-contained HTML file (opens offline, can be mailed): the card, the verdict, z at CCR 1, 5 and "
               "10, PC1 angle, spectral metrics, the embedding histogram, capacities and provenance; the same file "
               "as `python -m analysis report`. Made when you click (the CCR 5 and 10 sweeps take a while).")
st.download_button("Download report", compute.report_download(view, loaded), report_file_name(info), "text/html",
                   icon=":material/download:", help=REPORT_HELP)
view_state_button(view)
