"""The dashboard frame: the shared sidebar, then the chosen page. Run: ``streamlit run app.py``."""

import streamlit as st

from dashboard.compute import page_drawn

st.set_page_config(page_title="Readout geometry", page_icon=":material/scatter_plot:", layout="wide")
pages = [
    st.Page("pages/triage.py", title="Triage", icon=":material/stethoscope:", default=True),
    st.Page("pages/readout.py", title="Readout alignment", icon=":material/ssid_chart:"),
    st.Page("pages/capacity.py", title="Embedding geometry & capacity", icon=":material/scatter_plot:"),
    st.Page("pages/training.py", title="Across training", icon=":material/timeline:"),
    st.Page("pages/models.py", title="Across models", icon=":material/compare_arrows:"),
    st.Page("pages/compare.py", title="Side by side", icon=":material/splitscreen:"),
    st.Page("pages/probes.py", title="Linear probes", icon=":material/target:"),
    st.Page("pages/token_map.py", title="Token map", icon=":material/bubble_chart:"),
]
st.navigation(pages).run()  # each page draws the shared sidebar first (dashboard.sidebar.sidebar)
page_drawn()  # exact and background work of other tabs carry on once the browser has drawn this page
