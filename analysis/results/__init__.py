"""Result collections that give their tables and plotly figures; no math."""
