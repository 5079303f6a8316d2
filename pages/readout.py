"""Readout alignment: z by layer with sliders for k, CCR depth and layer, PC angles, spectral metrics."""

import streamlit as st

from analysis.results import figures
from analysis.results.collections import spectrum_table
from analysis.runs.settings import OVERLAY_CCRS, along_sliders, k_grid, nearby
from dashboard import compute
from dashboard.export import chart, provenance, view_state_button
from dashboard.sidebar import sidebar
from dashboard.widgets import ccr_slider, k_slider, layer_slider

view = sidebar()
st.title("Readout alignment")
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    n_entries = compute.states(view, loaded).value.n_layers
d = loaded.anatomy.d_model

controls = st.columns([2, 2, 3])
grid = k_grid(d)
k, ccr = k_slider(d, controls[0]), ccr_slider(controls[1])
overlay = controls[2].multiselect("Overlay CCR depths", OVERLAY_CCRS, default=[],
                                  help="e.g. 1, 5, 10: one more full sweep per depth (cached once computed).")

asked_for = [(k, (ccr,))] + ([(k, tuple(sorted(overlay)))] if overlay else [])
# The z chart's place. After a move the last chart drawn stays there, faded at once (``app.py``), until this run draws
# the new setting's: an info box in its place moved every chart below up and back down (chromium laid out and painted
# the page twice a move, on the cores the exact run needs), and a visitor scrolled down saw the page jump.
place = st.container(key="z-chart")
status = st.container()  # what the background has ready, under the curve it will replace
below = st.container() if overlay else None  # the overlay's chart
layer = layer_slider(n_entries)  # before the runs: a preview the page makes at a few layers includes this one
with compute.friendly_errors():  # the exact runs when stored, else previews drawn now (the exact ones follow)
    runs = [compute.stored_pga(view, loaded, *wanted) or compute.preview_pga(view, loaded, *wanted, layer)
            for wanted in asked_for]
run = runs[0]
with place:
    chart(run.z_figure(), run.table(), "z-by-layer",
          f"{run.describe()}. {run.error_bars()} "
          + provenance(run.provenance, "Hidden states"))

if overlay:
    several = runs[1]
    with below:
        chart(several.z_figure(title=f"z at several CCR depths (k = {k})"), several.table(), "z-ccr-overlay",
              "Removing more components unmasks alignment hidden by a few dominant directions. "
              + several.describe(k))

chosen = run.layer(layer)
chart(run.null_figure(layer), run.null_table(layer), "null-distribution",
      f"Layer {layer}: rho_readout = {chosen.rho_readout:.4f}, null mean {chosen.null_mean:.4f}, "
      f"sd {chosen.null_std:.4f}, z = {chosen.z:.2f}, p = {chosen.p_value:.3f} ({run.describe()}).")

lower = run.lower_table()  # their numbers: every layer they draw
chart(run.pc1_figure(), lower, "pc1-angle", "0 deg: inside V_k; 90 deg: a dark direction.")
chart(run.pc_heatmap(), lower, "pc-angle-heatmap")
chart(run.spectral_figure(), lower, "spectral",
      "On the CCR-corrected states. RankMe: exp(entropy of normalised singular values); alpha-ReQ: power-law "
      "decay of eigenvalues fitted over ranks 1-100; isotropy: IsoScore (0 = one direction, 1 = all d equal); "
      "condition number: largest / smallest singular value above 1e-5 of the largest.")
with compute.friendly_errors():
    basis = compute.readout(loaded)
chart(figures.readout_spectrum(basis.singular_values, k), spectrum_table(basis), "readout-spectrum")
view_state_button(view, k=k, ccr=ccr, layer=layer)

compute.page_drawn()
# Outside this run: each layer's PCA, the exact runs (the page reruns when they are in), the null bases of the widest k
# a move reaches (a jump to the k slider's end), previews of the nearby settings and then of every setting along both
# sliders (in their place the exact runs of those as quick as a preview: k = 1), then the nearby settings' exact runs. A
# move replaces the list; a move before the previews are ready previews at once, ahead of the exact run.
near = nearby(grid, k, ccr)
exact = [compute.exact_task(view, loaded, *wanted, shown_layer=layer)
         for wanted, r in zip(asked_for, runs, strict=True) if r.preview]
ahead = compute.ahead_tasks(view, loaded, list(dict.fromkeys(near + along_sliders(grid, k, ccr))))
compute.background(ahead[:1] + exact + ahead[1:] + compute.fill_tasks(view, loaded, near), status)
