"""The dashboard frame: the shared sidebar, then the chosen page. Run: ``streamlit run app.py``."""

import logging
import os
import uuid
from pathlib import Path

import streamlit as st

from dashboard.compute import page_drawn
from dashboard.text import literal

# The tab's icon from a file of the project's: for a Material icon there, the browser fetches it from Google's fonts.
st.set_page_config(page_title="Readout geometry", page_icon=str(Path(__file__).parent / "dashboard" / "icon.svg"),
                   layout="wide")
# Metric values smaller than Streamlit's, so that "indeterminate" fits a third of a 1000 px window. The z chart of a
# setting the visitor has moved away from fades at once, in one step (Streamlit fades a stale element over a second,
# after half a second; a page's rerun draws its chart again within 0.15 s, so that one does not blink).
st.html("<style>[data-testid=stMetricValue] { font-size: 1.6rem; }"
        ".st-key-z-chart [data-stale=true] { opacity: 0.33; transition: opacity 0s 0.15s; }</style>")
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
try:
    st.navigation(pages).run()  # each page draws the shared sidebar first (dashboard.sidebar.sidebar)
except Exception as error:  # what no page turned into a message: one line for the visitor, the traceback in the log
    if os.environ.get("RG_DEBUG"):
        raise
    reference = uuid.uuid4().hex[:8]
    logging.getLogger("readout_geometry").exception("Unexpected error, reference %s", reference)
    st.error(literal(f"Something went wrong ({type(error).__name__}). The details are in the server's log under "
                     f"reference {reference}."), icon=":material/error:")
finally:  # also when the page stopped early (st.stop): other work carries on once the browser has drawn it
    page_drawn()
