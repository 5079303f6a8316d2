"""Readout alignment: z by layer with sliders for k, CCR depth and layer, PC angles, spectral metrics."""

import pandas as pd
import streamlit as st

from analysis.geometry.pga import default_k
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, provenance, view_state_button
from dashboard.state import remember, sidebar, url_int

view = sidebar()
st.title("Readout alignment")
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    hidden, hidden_provenance = compute.states(view, loaded)
d, n_entries = loaded.anatomy.d_model, hidden.n_layers

controls = st.columns([2, 2, 3])
k = controls[0].slider("k (readout dimensions)", 1, d, min(max(url_int("k", default_k(d)), 1), d))
ccr = controls[1].select_slider("CCR depth (components removed)", list(range(0, 11)),
                                value=min(max(url_int("ccr", 1), 0), 10))
overlay = controls[2].multiselect("Overlay CCR depths", [0, 1, 5, 10], default=[],
                                  help="e.g. 1, 5, 10: one more full sweep per depth (cached once computed).")
remember(k=k, ccr=ccr)

with compute.friendly_errors():
    results = compute.pga(view, loaded, k, ccr)
n = results[0].n_tokens
setting = (f"N = {n}, {results[0].n_pairs:,} pairs, k = {k}, R = 100, seed {view.seed}, model {loaded.ref.label}, "
           f"{loaded.spec['dtype']}")

table = pd.DataFrame([{"layer": r.layer, "z": r.z, "z_low": r.z_interval[0], "z_high": r.z_interval[1],
                       "rho_readout": r.rho_readout, "null_mean": r.null_mean, "null_std": r.null_std,
                       "p_value": r.p_value} for r in results])
chart(figures.z_by_layer({f"CCR-{ccr}": results}, f"z by layer at k = {k}, CCR-{ccr}"), table, "z-by-layer",
      f"{setting}. Error bars: 95 % bootstrap interval over the null draws. "
      + provenance(hidden_provenance, "Hidden states"))

if overlay:
    with compute.friendly_errors():
        curves = {f"CCR-{c}": compute.pga(view, loaded, k, c) for c in sorted(overlay)}
    rows = [{"ccr": c, "layer": r.layer, "z": r.z} for c in sorted(overlay) for r in curves[f"CCR-{c}"]]
    chart(figures.z_by_layer(curves, f"z by layer for several CCR depths (k = {k})"), pd.DataFrame(rows),
          "z-ccr-overlay", "Removing more components unmasks alignment hidden by a few dominant directions.")

layer = st.slider("Layer", 0, n_entries - 1, min(max(url_int("layer", n_entries // 2), 0), n_entries - 1))
remember(layer=layer)
chosen = results[layer]
null_table = pd.DataFrame({"null_rho": chosen.null})
chart(figures.null_distribution(chosen), null_table, "null-distribution",
      f"Layer {layer}: rho_readout = {chosen.rho_readout:.4f}, null mean {chosen.null_mean:.4f}, "
      f"sd {chosen.null_std:.4f}, z = {chosen.z:.2f}, p = {chosen.p_value:.3f} ({setting}).")

angles = pd.DataFrame([{"layer": r.layer, **{f"pc{i + 1}_deg": a for i, a in enumerate(r.pc_angles_deg)},
                        "variance_in_readout": r.variance_in_readout} for r in results])
left, right = st.columns(2)
with left:
    chart(figures.pc_angle_by_layer(results), angles, "pc1-angle", "0 deg: inside V_k; 90 deg: a dark direction.")
with right:
    chart(figures.pc_angle_heatmap(results), angles, "pc-angle-heatmap")
spectral = pd.DataFrame([{"layer": r.layer, "z": r.z, "rankme": r.rankme, "alpha_req": r.alpha_req,
                          "isotropy": r.isotropy, "condition_number": r.condition_number} for r in results])
chart(figures.spectral_small_multiples(results), spectral, "spectral",
      "On the CCR-corrected states. RankMe: exp(entropy of normalised singular values); alpha-ReQ: power-law "
      "decay of eigenvalues fitted over ranks 1-100; isotropy: IsoScore (0 = one direction, 1 = all d equal); "
      "condition number: largest / smallest singular value above 1e-5 of the largest.")
with compute.friendly_errors():
    basis = compute.readout(loaded)
chart(figures.readout_spectrum(basis.singular_values, k),
      pd.DataFrame({"rank": range(1, basis.d + 1), "singular_value": basis.singular_values}), "readout-spectrum")
view_state_button(view, k=k, ccr=ccr, layer=layer)
