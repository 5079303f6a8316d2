"""Linear probes per layer beside z: where the representation is linearly readable vs aligned."""

import streamlit as st

from analysis.data.labelled import builtin_task, labelled_from_bytes, labelled_from_hub, word_order_task
from analysis.errors import InputError
from dashboard import compute
from dashboard.export import chart, view_state_button
from dashboard.sidebar import sidebar
from dashboard.text import literal
from dashboard.view import demo_mode, upload_limit_mb

view = sidebar()
st.title("Linear probes")
options = ["Built-in: word order (original or shuffled)", "Built-in: which of four help topics", "Upload CSV or JSONL"]
source = st.radio("Labelled data", options if demo_mode() else [*options, "Hub dataset"], horizontal=True)
data = word_order_task()
if source == options[0]:
    st.caption("Both classes hold the same words, so the embedding layer is at chance by construction; layers that "
               "mix context can tell a passage from its shuffle.")
elif source == options[1]:
    data = builtin_task()
    st.caption("The topics differ in their words, so even the embedding layer probes near 1.0: this task says little "
               "about where layers differ (the word-order task does).")
elif source == "Hub dataset":
    name = st.text_input("hf:NAME[@CONFIG]:SPLIT (text and label columns)", value="hf:ag_news:test")
    with compute.friendly_errors():
        data = labelled_from_hub(name)
elif source.startswith("Upload"):
    upload = st.file_uploader(f"text,label columns (up to {upload_limit_mb()} MB)", type=["csv", "jsonl"])
    if upload is None:
        st.stop()
    if upload.size > upload_limit_mb() * 2**20:
        st.error(literal(f"{upload.name!r} is over the {upload_limit_mb()} MB limit."))
        st.stop()
    try:
        data = labelled_from_bytes(upload.getvalue(), upload.name)
    except InputError as error:
        st.error(literal(error))
        st.stop()
with compute.friendly_errors():
    loaded = compute.loaded_model(view)
    run = compute.stored_or_preview_probes(view, loaded, data)
chart(run.figure(), run.table(), "probes", run.describe())
status = st.container()
view_state_button(view, probe_data=data.name)
compute.page_drawn()
compute.background(compute.probes_tasks(view, loaded, data, run), status)
