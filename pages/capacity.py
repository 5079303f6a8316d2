"""Embedding geometry and capacity: cosine histograms with epsilon, the class, capacity curves, packing lab."""

import pandas as pd
import streamlit as st

from analysis.capacity.formulas import CLASS_NOTES, FORMULAS
from analysis.capacity.packing import fit_formulas, optimized_packing, random_packing
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import demo_mode, sidebar

view = sidebar()
st.title("Embedding geometry & capacity")
exact = st.toggle("Exact histogram (all pairs)", value=True,
                  help="Off: a seeded sample of 10^6 pairs, faster for large vocabularies.")
sample = None if exact else 1_000_000
with compute.friendly_errors():
    ref = compute.resolved(view.model, view.revision)
    embedding = compute.geometry(view, "embedding", sample)
stats = embedding.stats


def histogram_table(histogram):
    return pd.DataFrame({"left": histogram.edges[:-1], "right": histogram.edges[1:], "count": histogram.counts,
                         "share": histogram.shares})


chart(figures.cosine_histogram_figure(embedding.histogram, stats, "Input embedding: pairwise cosine similarity"),
      histogram_table(embedding.histogram), "embedding-cosines",
      f"{ref.label}; tensor {embedding.tensor_name}; {stats.n_zero_rows} all-zero rows dropped; mu and sigma "
      "by the exact closed form.")

report = compute.capacity(stats.d, stats.epsilon)
cols = st.columns(4)
cols[0].metric("epsilon = mu + 2 sigma", f"{stats.epsilon:.4f}")
cols[1].metric("Class", report.model_class)
cols[2].metric("d_model", stats.d)
cols[3].metric("Capacity (full form)", "indeterminate" if report.model_class == "Class 1"
               else f"{report.capacity['full']:.3g}")
st.info(CLASS_NOTES[report.model_class] + (" The full-form number extrapolates beyond the fitted range "
                                           "(k in [2000, 32000], d <= 4096)." if report.extrapolated else ""))

sensitivity = pd.DataFrame([{"formula": figures.FORMULA_LABELS[name],
                             f"eps - {report.delta}": f"{report.at_minus[name]:.3g}",
                             f"eps = {stats.epsilon:.4f}": f"{report.capacity[name]:.3g}",
                             f"eps + {report.delta}": f"{report.at_plus[name]:.3g}"} for name in FORMULAS])
st.markdown("**Sensitivity**: capacity is exponential in epsilon squared; compare models, not counts.")
st.dataframe(sensitivity, hide_index=True)
curve = figures.capacity_figure(stats.d, stats.epsilon)
curve_table = pd.DataFrame({"eps": curve.data[-2].x} | {name: trace.y for name, trace in
                                                         zip(FORMULAS, curve.data[:-1], strict=False)})
chart(curve, curve_table, "capacity-curves")
k_target = st.select_slider("k for the epsilon-against-d view", [2000, 4000, 8000, 16000, 32000, stats.n_rows],
                            value=stats.n_rows, format_func=lambda k: f"{k:,}" + (" (vocabulary)" if k == stats.n_rows
                                                                                 else ""))
by_d = figures.epsilon_by_dimension(k_target, stats.d, stats.epsilon)
chart(by_d, pd.DataFrame({"d": by_d.data[0].x} | {name: trace.y for name, trace in
                                                  zip(FORMULAS, by_d.data[:-1], strict=False)}), "epsilon-by-d")

if not embedding.tied_embeddings:
    st.subheader("Unembedding (untied model)")
    with compute.friendly_errors():
        unembedding = compute.geometry(view, "unembedding", sample)
        paired = compute.paired(view)
    chart(figures.cosine_histogram_figure(unembedding.histogram, unembedding.stats, "Unembedding rows"),
          histogram_table(unembedding.histogram), "unembedding-cosines")
    chart(figures.paired_cosine_figure(paired), histogram_table(paired), "embedding-vs-unembedding")
else:
    st.caption("Tied embeddings: the unembedding is the embedding, and cos(E_i, U_i) = 1 for every token.")

st.subheader("Packing lab")
st.caption("Where the constants come from: pack k unit vectors in d dimensions as nearly orthogonally as "
           "possible; eps* is the largest |cos| left. Random: best of T Gaussian draws. Optimised: the paper's "
           "Adam protocol (here with fewer steps unless you raise them).")
lab = st.columns(5)
ds = lab[0].multiselect("d", [16, 32, 64, 128, 256], default=[32, 64])
ks = lab[1].multiselect("k", [200, 500, 1000, 2000, 4000], default=[500, 1000])
method = lab[2].radio("Method", ["random", "optimized"], horizontal=True)
trials = lab[3].number_input("Trials (random)", 1, 100 if demo_mode() else 1000, 20)
steps = lab[4].number_input("Steps (optimised)", 10, 1000 if demo_mode() else 5000, 300)
if st.button("Run the cells", type="primary") and ds and ks:
    bar = st.progress(0.0, text="packing")
    cells = []
    with compute.friendly_errors():
        for number, (d, k) in enumerate((d, k) for d in sorted(ds) for k in sorted(ks)):
            bar.progress(number / (len(ds) * len(ks)), text=f"{method} packing k = {k}, d = {d}")
            cells.append(random_packing(k, d, int(trials), view.seed, view.device) if method == "random"
                         else optimized_packing(k, d, int(steps), view.seed, view.device))
    bar.empty()
    st.session_state["packing"] = cells
cells = st.session_state.get("packing")
if cells:
    fits = fit_formulas(cells) if len(cells) >= 4 else None
    chart(figures.packing_figure(cells, fits), pd.DataFrame([c.to_json() for c in cells]), "packing")
    if fits:
        st.dataframe(pd.DataFrame(fits).T, width="stretch")
view_state_button(view)
