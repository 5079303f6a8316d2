"""Side by side: two models, or two checkpoints of one model, on shared axes: z and the PC1 angle
against relative depth, epsilon and the class, and z's difference where the layer grids match. The
URL holds both references (``?a=NAME@REV&b=NAME@REV``), so a comparison is shared as a link."""

import streamlit as st

from analysis.capacity.atlas import SOURCE, published_models
from analysis.models.builtin import BUILTIN_NAME
from analysis.models.refs import KNOWN_MODELS
from analysis.results import figures
from analysis.results.collections import DepthCurves, atlas_table
from analysis.runs.settings import ModelChoice
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.text import literal
from dashboard.view import demo_mode, remember


def pick(column, label: str, start: str) -> str:
    """A reference (NAME or NAME@REVISION): free text, or the fixed list in demo mode."""
    if demo_mode():
        options = [BUILTIN_NAME, *KNOWN_MODELS]
        return column.selectbox(label, options, index=options.index(start) if start in options else 0)
    return column.text_input(label, value=start, help="NAME or NAME@REVISION (a checkpoint, a Hub branch or SHA)")


view = sidebar()
st.title("Side by side")
start_a = st.query_params.get("a", view.choice.label)
columns = st.columns(2)
text_a = pick(columns[0], "Model A", start_a).strip()
text_b = pick(columns[1], "Model B", st.query_params.get("b", start_a)).strip()
remember(a=text_a, b=text_b)
with compute.friendly_errors():
    choice_a, choice_b = ModelChoice.parse(text_a), ModelChoice.parse(text_b)
    # stored, else a preview of each side (its forward pass, then the z preview), the exact triage after them
    runs = {"A": compute.side(view, choice_a, preview=True)}
    runs["B"] = runs["A"] if choice_b == choice_a else compute.side(view, choice_b, preview=True)
previewed = any(run.pga.preview for run in runs.values())
if choice_a == choice_b:
    st.info("Model A and model B are the same reference: change one (another model, or name@another-checkpoint).")

for column, (side, run) in zip(st.columns(2), runs.items(), strict=True):
    verdict, report = run.verdict, run.verdict.capacity
    named = run.card["name"] + (f" @ {run.card['revision']}" if run.card["revision"] else "")
    column.markdown(f"**{side}: {literal(named)}**  \n{literal(run.card['identity'])}")
    metrics = column.columns(2)
    metrics[0].metric("Peak z (preview)" if run.pga.preview else "Peak z", f"{verdict.peak.z:.1f}",
                      f"layer {verdict.peak.layer}", delta_color="off", delta_arrow="off")
    metrics[1].metric("Regime", verdict.regime)
    metrics = column.columns(2)
    metrics[0].metric("epsilon", f"{run.stats.epsilon:.4f}")
    metrics[1].metric("Class", report.model_class)

curves = DepthCurves({f"A: {choice_a.label}": runs["A"].pga.at(), f"B: {choice_b.label}": runs["B"].pga.at()},
                     previewed)
settings = "; ".join(f"{side}: {run.pga.describe()}" for side, run in runs.items())
chart(curves.figure(), curves.table(), "side-by-side-z", settings)
chart(curves.pc1_figure(), curves.table(), "side-by-side-pc1")
difference = curves.difference_figure()
if difference is None:
    st.caption("The two layer grids differ, so z is compared against relative depth only (no per-layer difference).")
else:
    chart(difference, curves.difference(), "side-by-side-difference",
          "Same layer grid: z of B minus z of A, layer by layer.")
widths = {side: run.card["d_model"] for side, run in runs.items()}
chart(figures.atlas_figure(published_models(), {f"{side}: {choice.label}": (widths[side], runs[side].stats.epsilon)
                                                for side, choice in (("A", choice_a), ("B", choice_b))}),
      atlas_table(), "side-by-side-atlas", f"Both models among the published ones ({SOURCE}).")
view_state_button(view, a=text_a, b=text_b)
if previewed:  # the exact triage of each side (its hidden states cached now); a newer choice stops it
    with compute.friendly_errors():
        for choice in dict.fromkeys((choice_a, choice_b)):
            compute.side(view, choice)
    st.rerun()
