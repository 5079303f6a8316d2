"""Embedding geometry and capacity: cosine histograms with epsilon, the class, capacity curves, packing lab."""

import streamlit as st

from analysis.capacity.atlas import SOURCE, published_models
from analysis.capacity.formulas import CLASS_NOTES
from analysis.capacity.packing import fit_formulas, optimized_packing, random_packing
from analysis.results import figures
from analysis.results.collections import (
    CapacityRun,
    atlas_table,
    capacity_curves_table,
    epsilon_curves_table,
    fits_table,
    histogram_table,
    packing_table,
    sensitivity_table,
)
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.text import literal
from dashboard.view import demo_mode

view = sidebar()
st.title("Embedding geometry & capacity")
exact = st.toggle("Exact histogram (all pairs)", value=True,
                  help="On: a preview from every pair among 2,048 random rows at once, then all pairs. "
                       "Off: a seeded sample of 10^6 pairs.")
sample = None if exact else 1_000_000


def histogram(which: str) -> CapacityRun:
    """The all-pairs histogram (its preview first, the rest in the background) or the sampled one."""
    return compute.stored_or_preview_capacity(view, which) if exact else compute.capacity(view, which, sample)


def title(run: CapacityRun, text: str) -> str:
    return f"Preview: {text}" if run.preview else text


with compute.friendly_errors():
    ref = compute.view_ref(view)
    embedding = histogram("embedding")
stats, report = embedding.geometry.stats, embedding.report

chart(embedding.histogram_figure(title(embedding, "Embedding: pairwise cosines")), embedding.table(),
      "embedding-cosines", f"{ref.label}; tensor {embedding.geometry.tensor_name}; {embedding.counted()}; "
      f"{stats.n_zero_rows} all-zero rows dropped; mu and sigma by the exact closed form.")
status = st.container()

cols = st.columns(3)
cols[0].metric("epsilon", f"{stats.epsilon:.4f}", "mu + 2 sigma", delta_color="off", delta_arrow="off")
cols[1].metric("Class", report.model_class, f"d_model {stats.d}", delta_color="off", delta_arrow="off")
indeterminate = report.status == "indeterminate"
cols[2].metric("Capacity", "indeterminate" if indeterminate else f"{report.capacity['full']:.3g}", "full form",
               delta_color="off", delta_arrow="off")
st.info(CLASS_NOTES[report.model_class] + (" The full-form number extrapolates beyond the fitted range "
                                           "(k in [2000, 32000], d <= 4096)."
                                           if report.extrapolated and not indeterminate else ""))
st.subheader("Among the published models")
measured = list(st.session_state.get("measured", {}).values())
chart(embedding.atlas_figure(measured), atlas_table(measured), "capacity-atlas",
      f"Published epsilon, d_model and class: {SOURCE}. Capacities in the hover are the project's formulas at the "
      "published (d_model, epsilon).")
st.markdown(literal(embedding.placement))
with st.expander("Measure a published model here"):
    if demo_mode():
        st.caption("Measuring is off in demo mode (it fetches a model's embedding shard from the Hub).")
    else:
        names = [m.name for m in published_models()]
        pick = st.selectbox("Published model", names, index=names.index("TinyLlama 1.1B"),
                            help="Fetches only the shard that holds the embedding (and the model's JSON files).")
        if st.button("Measure its epsilon"):
            with compute.friendly_errors():
                found = compute.measure_published(view, pick)
            st.session_state.setdefault("measured", {})[found.published.hub_id] = found
            st.rerun()
    for found in measured:
        st.caption(literal(found.describe()))

if indeterminate:
    st.markdown("**Sensitivity**: none to show. For Class 1 the formulas are outside their domain, so they give no "
                "capacity at this epsilon or near it.")
else:
    st.markdown("**Sensitivity**: capacity is exponential in epsilon squared; compare models, not counts.")
    st.dataframe(sensitivity_table(report), hide_index=True)
chart(embedding.capacity_figure(), capacity_curves_table(report.d, report.eps), "capacity-curves",
      "Orange: where the full form leaves its fitted k range [2000, 32000] (extrapolation).")
k_target = st.select_slider("k for the epsilon-against-d view", [2000, 4000, 8000, 16000, 32000, stats.n_rows],
                            value=stats.n_rows, format_func=lambda k: f"{k:,}" + (" (vocabulary)" if k == stats.n_rows
                                                                                 else ""))
chart(figures.epsilon_by_dimension(k_target, report.d, report.eps), epsilon_curves_table(k_target), "epsilon-by-d")

unembedding = None
if not embedding.geometry.tied_embeddings:
    st.subheader("Unembedding (untied model)")
    with compute.friendly_errors():
        unembedding = histogram("unembedding")
        paired = compute.paired(view)
    chart(unembedding.histogram_figure(title(unembedding, "Unembedding: pairwise cosines")), unembedding.table(),
          "unembedding-cosines", f"Tensor {unembedding.geometry.tensor_name}; {unembedding.counted()}.")
    chart(figures.paired_cosine_figure(paired), histogram_table(paired), "embedding-vs-unembedding",
          f"{int(paired.counts.sum()):,} tokens: the cosine of each token's embedding and unembedding rows.")
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
    cells = []
    with compute.friendly_errors(), compute.Bar("packing") as bar:
        grid = [(d, k) for d in sorted(ds) for k in sorted(ks)]
        for number, (d, k) in enumerate(grid):
            bar(f"{method} packing k = {k}, d = {d}", number, len(grid))
            cells.append(random_packing(k, d, int(trials), view.seed, view.device) if method == "random"
                         else optimized_packing(k, d, int(steps), view.seed, view.device))
    st.session_state["packing"] = cells
cells = st.session_state.get("packing")
if cells:
    fits = fit_formulas(cells) if len(cells) >= 4 else None
    chart(figures.packing_figure(cells, fits), packing_table(cells), "packing")
    if fits:
        st.dataframe(fits_table(fits), width="stretch")
view_state_button(view)
compute.page_drawn()
previewed = [run.geometry.which for run in (embedding, unembedding) if run is not None and run.preview]
compute.background([compute.capacity_task(view, which) for which in previewed], status)
