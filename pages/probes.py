"""Linear probes per layer beside z: where the representation is linearly readable vs aligned."""

import pandas as pd
import streamlit as st

from analysis.errors import InputError
from analysis.geometry.pga import default_k
from analysis.geometry.probes import builtin_task, labelled_from_bytes, labelled_from_hub, probe_layers
from analysis.results import figures
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.state import demo_mode, sidebar, upload_limit_mb

view = sidebar()
st.title("Linear probes")
options = ["Built-in: which of four Python help topics", "Upload CSV or JSONL"]
source = st.radio("Labelled data", options if demo_mode() else [*options, "Hub dataset"], horizontal=True)
data = builtin_task()
if source == "Hub dataset":
    name = st.text_input("hf:NAME[@CONFIG]:SPLIT (text and label columns)", value="hf:ag_news:test")
    with compute.friendly_errors():
        data = labelled_from_hub(name)
elif source.startswith("Upload"):
    upload = st.file_uploader(f"text,label columns (up to {upload_limit_mb()} MB)", type=["csv", "jsonl"])
    if upload is None:
        st.stop()
    if upload.size > upload_limit_mb() * 2**20:
        st.error(f"{upload.name!r} is over the {upload_limit_mb()} MB limit.")
        st.stop()
    try:
        data = labelled_from_bytes(upload.getvalue(), upload.name)
    except InputError as error:
        st.error(str(error))
        st.stop()
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    pooled = compute.pooled(loaded, data.texts)
    result = probe_layers(pooled, data.labels, seed=view.seed)
    z = [r.z for r in compute.pga(view, loaded, default_k(loaded.anatomy.d_model), 1)]
chart(figures.probe_figure(result.accuracy, result.baseline, z),
      pd.DataFrame({"layer": range(len(result.accuracy)), "accuracy": result.accuracy, "z": z}), "probes",
      f"{data.name}: {len(result.classes)} classes, {result.n_train} training and {result.n_test} held-out texts "
      f"(mean-pooled, first 64 tokens); logistic regression on standardised features; z at k = 100, CCR-1, "
      f"N = {view.n_tokens}.")
view_state_button(view, probe_data=data.name)
