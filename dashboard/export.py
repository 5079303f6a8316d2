"""Export buttons under each chart: its numbers as CSV and JSON, the chart as standalone HTML."""

from __future__ import annotations

import json
from dataclasses import asdict

import pandas as pd
import plotly.graph_objects as go
import streamlit as st

from analysis.results.figures import CONFIG
from dashboard.plot import plot
from dashboard.text import literal
from dashboard.view import ViewState


def chart(fig: go.Figure, table: pd.DataFrame, name: str, caption: str | None = None) -> None:
    """Show ``fig``, an optional caption, and CSV / JSON / HTML downloads of it (each made when it is clicked, not
    in every run of the page)."""
    plot(fig, f"chart-{name}")
    if caption:
        st.caption(literal(caption))
    with st.popover("Download", icon=":material/download:"):  # one button: whole in a half-width column too
        st.download_button("Numbers (CSV)", lambda: table.to_csv(index=False), f"{name}.csv", "text/csv",
                           key=f"csv-{name}")
        st.download_button("Numbers (JSON)", lambda: table.to_json(orient="records", indent=1), f"{name}.json",
                           "application/json", key=f"json-{name}")
        st.download_button("Chart (HTML)", lambda: fig.to_html(include_plotlyjs=True, full_html=True, config=CONFIG),
                           f"{name}.html", "text/html", key=f"html-{name}")


def view_state_button(view: ViewState, **page_controls) -> None:
    """Download the view's full state (sidebar and page controls) as JSON."""
    state = {**asdict(view), **page_controls}
    st.download_button("View state (JSON)", json.dumps(state, indent=2), "view-state.json", "application/json",
                       key="view-state")


def provenance(entry_provenance: dict | None, what: str) -> str:
    """"computed at ... with ..." for a cache entry's provenance."""
    if not entry_provenance:
        return ""
    libraries = ", ".join(f"{k} {v}" for k, v in entry_provenance.get("libraries", {}).items())
    return (f"{what}: computed at {entry_provenance.get('computed_at', '?')} in "
            f"{entry_provenance.get('seconds', 0):.1f} s with {libraries}.")
