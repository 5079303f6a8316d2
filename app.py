"""The dashboard frame: shared sidebar, then the chosen page (``streamlit run app.py``)."""

import streamlit as st

from dashboard.state import sidebar

st.set_page_config(page_title="Readout geometry", page_icon=":material/scatter_plot:", layout="wide")
st.session_state["view"] = sidebar()
page = st.navigation([st.Page("pages/triage.py", title="Triage", icon=":material/stethoscope:", default=True)])
page.run()
