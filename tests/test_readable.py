"""One answer per quantity, a verdict that explains itself, axes a person can read."""

import json

import numpy as np
import pytest

from analysis.results import figures
from tests.test_app import charts, run_page, shown
from tests.test_cli import run_cli


@pytest.fixture(scope="module")
def wide_model(tokenizer, tmp_path_factory):
    """A model wide enough for near-orthogonal embedding rows (Class 2: epsilon < 0.1)."""
    from analysis.models.tiny import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("wide") / "model", "gpt_neox", tokenizer, d_model=768, n_layers=1,
                           n_heads=8)


def stars(app) -> list[dict]:
    capacity = next(c for c in charts(app) if "Capacity against epsilon" in c["layout"]["title"]["text"])
    return [trace for trace in capacity["data"] if trace.get("name") == "this model"]


def test_class_1_capacity_is_indeterminate_on_the_page_in_the_report_and_in_json(neox_folder):
    app = run_page("pages/capacity.py", model=neox_folder)
    assert not app.exception and not app.error
    assert next(m for m in app.metric if m.label == "Capacity").value == "indeterminate"
    assert not stars(app) and not app.dataframe  # no capacity drawn, no sensitivity table
    assert any("outside their domain" in shown(m.value) for m in app.markdown)
    out = json.loads(run_cli("capacity", str(neox_folder), "--json").stdout)
    assert out["class"] == "Class 1" and out["capacity"]["status"] == "indeterminate"
    assert out["capacity"]["full"] is None and out["sensitivity"]["eps_plus"]["full"] is None


def test_class_2_capacity_is_estimated_everywhere(wide_model):
    out = json.loads(run_cli("capacity", str(wide_model), "--json").stdout)
    assert out["class"] == "Class 2" and out["capacity"]["status"] == "estimated" and out["capacity"]["full"] > 1
    app = run_page("pages/capacity.py", model=wide_model)
    assert not app.exception and not app.error
    value = next(m for m in app.metric if m.label == "Capacity").value
    assert float(value) == pytest.approx(out["capacity"]["full"], rel=1e-2)
    assert stars(app) and len(app.dataframe) == 1  # the model's capacities drawn, the sensitivity table shown


def test_the_verdict_says_which_layers_it_reads_and_what_the_deeper_ccr_means(neox_folder):
    app = run_page("pages/triage.py", model=neox_folder, n_tokens=128)
    assert not app.exception and not app.error
    captions = " ".join(shown(c.value) for c in app.caption)
    assert "The regime reads layers 2-2" in captions and "the final layer 3" in captions and "read apart" in captions
    assert "CCR-5 at layer 2: z = " in captions and "principal components removed instead of 1" in captions


def test_log_axes_label_powers_of_ten_only_and_second_axes_are_round():
    axis = figures.log_axis([1.0, 1e100])
    assert axis["dtick"] == 20 and axis["exponentformat"] == "power"  # a round step, at most eight labels
    assert figures.log_axis([3.0, 700.0])["dtick"] == 1  # never "2 5" minor labels
    assert [figures.round_step(span) for span in (14.6, 0.9, 63)] == [5, 0.2, 20]
    capacity = figures.capacity_figure(576, 0.05)
    assert capacity.layout.yaxis.dtick >= 1 and capacity.layout.yaxis.type == "log"
    probes = figures.probe_figure(np.array([0.5, 0.9, 1.0]), 0.25, [1.3, -7.3, 7.5])
    assert probes.layout.yaxis2.dtick == 5 and probes.layout.yaxis2.tick0 == 0


def test_an_interrupted_training_leaves_a_series_marked_partial(tmp_path):
    from analysis.models.train_demo import PARTIAL, DemoSettings, partial, train_demo

    settings = DemoSettings(widths=(8,), n_layers=1, steps=8, batch_size=2, context=16)

    def stop_at_step_5(stage: str, done: int, total: int) -> None:
        if done == 5:
            raise KeyboardInterrupt  # the tab closed, or Ctrl-C

    with pytest.raises(KeyboardInterrupt):
        train_demo(tmp_path, settings, stop_at_step_5)
    folder = tmp_path / "neox-d8"
    assert partial(folder) == {"last_checkpoint": 4, "steps": 8} and (folder / "checkpoint-4").is_dir()
    app = run_page("pages/training.py", model=folder, n_tokens=128)
    assert any("This series is partial" in shown(w.value) for w in app.warning)
    stages = []
    train_demo(tmp_path, settings, lambda stage, done, total: stages.append(stage))
    assert partial(folder) is None and not (folder / PARTIAL).exists()
    assert any("left" in stage for stage in stages)  # the time left, measured while training


def test_a_link_restores_the_source_it_was_made_with(series):
    app = run_page("pages/triage.py", model=series, source="Checkpoint folder", n_tokens=128)
    assert not app.exception and app.sidebar.selectbox[0].value == "Checkpoint folder"
    assert app.query_params["source"] == "Checkpoint folder"
    app = run_page("pages/triage.py", model=series / "checkpoint-0", n_tokens=128)
    assert app.sidebar.selectbox[0].value == "Local folder" and "source" not in app.query_params


def test_the_word_order_task_is_at_chance_in_the_embeddings_by_construction(tiny_models):
    """A passage and its shuffle tokenise to the same tokens: their mean-pooled embeddings are equal (layer 0), and
    the layers that mix context tell them apart."""
    from analysis.activations.pooling import pooled_states
    from analysis.data.labelled import word_order_task
    from analysis.runs import analyses
    from analysis.runs.settings import Compute, ModelChoice

    task = word_order_task()
    assert task.labels.count("shuffled") == task.labels.count("original") == len(task.texts) // 2
    original = next(t for t, y in zip(task.texts, task.labels, strict=True) if y == "original")
    words = original.split()
    shuffled = " " + " ".join(reversed(words))
    for family in ("gpt_neox", "gpt2"):
        loaded = analyses.open_model(ModelChoice(str(tiny_models[(family, False)])), Compute("cpu"))
        ids = [loaded.tokenizer(t, add_special_tokens=False)["input_ids"] for t in (original, shuffled)]
        assert sorted(ids[0]) == sorted(ids[1]) and len(ids[0]) <= 64  # the same tokens, within the pooled window
        pooled = pooled_states(loaded, [original, shuffled])
        np.testing.assert_allclose(pooled[0, 0], pooled[0, 1], atol=1e-5)  # the embeddings cannot tell
        assert not np.allclose(pooled[-1, 0], pooled[-1, 1], atol=1e-4)  # context-mixing layers can


def _three_layers() -> list:
    """Three layers' PGA results, made up (for the figures only)."""
    from analysis.geometry.pga import LayerPGA

    return [LayerPGA(layer, 4, 1, 64, 2016, 0.5, np.linspace(0.1, 0.3, 10), 1.0, (0.5, 1.5), 0.3, np.full(10, 45.0),
                     np.full(10, 0.5), 0.5, 2.0, 1.0, 0.5, 10.0 ** layer) for layer in range(3)]


def test_figures_made_in_one_call_place_panels_lines_and_labels_as_plotlys_helpers_do():
    import plotly.graph_objects as go
    from plotly.subplots import make_subplots

    results = _three_layers()
    panels = figures.spectral_small_multiples(results).layout
    grid = make_subplots(rows=1, cols=len(figures.SPECTRAL), subplot_titles=[t for _, t in figures.SPECTRAL]).layout
    for axis in ("xaxis", "yaxis", "xaxis3", "yaxis5"):
        assert panels[axis].domain == pytest.approx(grid[axis].domain) and panels[axis].anchor == grid[axis].anchor
    assert [(a.text, a.x, a.font.size) for a in panels.annotations] == [(a.text, pytest.approx(a.x), a.font.size)
                                                                       for a in grid.annotations]
    helper = go.Figure(go.Scatter(x=[0, 1], y=[0, 1]))
    helper.add_hline(y=90, line_dash="dot", line_color=figures.INK, annotation_text="90 deg: dark direction")
    helper.add_vline(x=4, line_color="#d62728", annotation_text="k = 4")
    one_call = (figures.pc_angle_by_layer(results).layout, figures.readout_spectrum(np.ones(8), 4).layout)
    assert [s.to_plotly_json() for s in helper.layout.shapes] == [one_call[0].shapes[0].to_plotly_json(),
                                                                 one_call[1].shapes[0].to_plotly_json()]
    assert [a.to_plotly_json() for a in helper.layout.annotations] == [one_call[0].annotations[0].to_plotly_json(),
                                                                      one_call[1].annotations[0].to_plotly_json()]


def _luminance(colour: str) -> float:
    """WCAG relative luminance of a ``#rrggbb`` or ``#rgb`` colour (or black or white)."""
    colour = {"black": "#000000", "white": "#ffffff"}.get(colour, colour)
    colour = "#" + "".join(c * 2 for c in colour[1:]) if len(colour) == 4 else colour
    assert colour.startswith("#") and len(colour) == 7, f"a reference mark's colour is not #rrggbb: {colour}"
    channels = [int(colour[i:i + 2], 16) / 255 for i in (1, 3, 5)]
    r, g, b = (c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4 for c in channels)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def _contrast(one: str, other: str) -> float:
    light, dark = sorted((_luminance(one), _luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def test_every_reference_mark_reads_on_a_light_page_and_on_a_dark_one():
    """The charts are drawn on the page's own background (Streamlit's light or dark theme): a line or a marker in
    black, or a shape left at plotly's default #444, disappears on the dark one."""
    from analysis.capacity.atlas import published_models
    from analysis.capacity.epsilon import CosineStats, Histogram

    assert _contrast("#000000", "#0e1117") < 1.2 and _contrast("#444444", "#0e1117") < 2  # the check can fail
    results = _three_layers()
    histogram = Histogram(np.linspace(-1, 1, 11), np.arange(10))
    made = [figures.z_by_layer({"model": results}), figures.pc_angle_by_layer(results),
            figures.pc1_by_relative_depth({"model": results}), figures.null_distribution(results[0]),
            figures.readout_spectrum(np.ones(8), 4), figures.probe_figure(np.array([0.5, 0.7]), 0.5, [1.0, 3.0]),
            figures.cosine_histogram_figure(histogram, CosineStats(0.4, 0.1, 100, 0, 576), "cosines"),
            figures.capacity_figure(576, 0.2), figures.capacity_figure(576, 0.6, indeterminate=True),
            figures.epsilon_by_dimension(1e5, 576, 0.2), figures.z_difference([0, 1], [1.0, -1.0], ("A", "B")),
            figures.atlas_figure(published_models(), {"this model": (576, 0.2)})]
    marks = []
    for figure in made:
        marks += [shape.line.color or "#444444" for shape in figure.layout.shapes if shape.type == "line"]
        marks += [colour for trace in figure.data if trace.type == "scatter" and trace.marker.symbol == "star"
                  for colour in (trace.marker.color, trace.marker.line.color) if colour]  # a point, its outline
    assert len(marks) >= 15
    for page in ("#ffffff", "#0e1117"):  # Streamlit's light and dark backgrounds
        faint = sorted({mark for mark in marks if _contrast(mark, page) < 2.2})
        assert not faint, f"marks that disappear on {page}: {faint}"
