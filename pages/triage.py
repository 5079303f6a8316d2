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
st.markdown(literal(f"{info['architecture'].removesuffix('ForCausalLM')}: {info['n_layers']} blocks, d_model "
                    f"{info['d_model']}, vocabulary {info['vocab_size']:,}, "
                    f"{'tied' if info['tied_embeddings'] else 'untied'} embeddings"))
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
        compute.background([compute.triage_task(view, loaded)])  # the page reruns when it is in
    st.stop()
with compute.friendly_errors():
    run = compute.triage(view, loaded)
summary, stats, pga = run.verdict, run.stats, run.pga
k, ccr = pga.settings.ks[0], pga.settings.ccrs[0]
st.markdown(f"#### Verdict (k = {k}, CCR-{ccr}, N = {pga.n_tokens}, R = {pga.settings.n_null}, "
            f"seed {pga.settings.seed})")
QUIET = dict(delta_color="off", delta_arrow="off")
cols = st.columns(3)
cols[0].metric("Peak z", f"{summary.peak.z:.1f}", f"layer {summary.peak.layer}", help=explain("z"), **QUIET)
cols[1].metric("Lowest z", f"{summary.lowest.z:.1f}", f"layer {summary.lowest.layer}", help=explain("z"), **QUIET)
cols[2].metric("Regime", summary.regime, help=f"{REGIME_TEXT[summary.regime]}. {explain('regime') or ''}")
cols = st.columns(3)
if summary.worst_late_deeper_ccr is not None:
    deeper = summary.worst_late_deeper_ccr
    cols[0].metric(f"CCR-{deeper.ccr}, layer {summary.worst_late.layer}", f"{deeper.z:.1f}",
                   f"{deeper.z - summary.worst_late.z:+.1f} vs CCR-{ccr}", help=explain("ccr"))
if summary.worst_late is not None:
    cols[1].metric("PC1 angle", f"{summary.worst_late.pc1_angle_deg:.0f} deg", f"layer {summary.worst_late.layer}",
                   help=explain("pc1"), **QUIET)
for sentence in (summary.explain_layers(), summary.explain_deeper(), summary.width_rule.describe()):
    if sentence:
        st.caption(sentence)
report = summary.capacity
indeterminate = report.model_class == "Class 1"
cols = st.columns(3)
cols[0].metric("epsilon", f"{stats.epsilon:.4f}", f"mu {stats.mu:.2f}, sd {stats.sigma:.2f}", help=explain("epsilon"),
               **QUIET)
cols[1].metric("Class", report.model_class, help=explain("epsilon"))
cols[2].metric("Capacity", "indeterminate" if indeterminate else f"{report.capacity['full']:.3g}",
               None if indeterminate else f"JL (C = 3.03): {report.capacity['jl_fitted']:.3g}"
               + (", extrapolated" if report.extrapolated else ""), help=explain("capacity"), **QUIET)
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
