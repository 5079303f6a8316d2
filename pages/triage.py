"""Triage: the model card of the chosen model and checkpoint."""

import streamlit as st

from dashboard.compute import card, friendly_errors, resolved

view = st.session_state["view"]
st.title("Triage")
with friendly_errors():
    ref = resolved(view.model, view.revision)
    info = card(ref)
st.subheader(info["name"] + (f" @ {info['revision']}" if info["revision"] else ""))
cols = st.columns(5)
cols[0].metric("Architecture", info["architecture"].removesuffix("ForCausalLM"))
cols[1].metric("Layers", info["n_layers"])
cols[2].metric("d_model", info["d_model"])
cols[3].metric("Vocabulary", f"{info['vocab_size']:,}")
cols[4].metric("Embeddings", "tied" if info["tied_embeddings"] else "untied")
st.caption(f"Identity loaded: `{info['identity']}` ({info['kind']})")
if info["checkpoints"]:
    st.caption(f"{len(info['checkpoints'])} checkpoints, steps {info['checkpoints'][0]} .. {info['checkpoints'][-1]}")
