"""The dashboard through Streamlit's AppTest: every page, a tiny model and the built-in one."""

import base64
import gzip
import json
import re
from importlib.resources import files
from pathlib import Path

import numpy as np
import pytest
from streamlit.testing.v1 import AppTest

APP = str(Path(__file__).resolve().parent.parent / "app.py")
PAGES = ["pages/triage.py", "pages/readout.py", "pages/capacity.py"]


def run_page(page: str, settle: bool = True, **query) -> AppTest:
    """Run ``page`` with ``query`` as its URL parameters; ``settle``: then as the page's status line would,
    let its background work finish and rerun it while that work brought a result the page shows."""
    app = AppTest.from_file(APP, default_timeout=600)
    for key, value in query.items():
        app.query_params[key] = str(value)
    app.switch_page(page)
    app.run()
    return settled(app) if settle else app


def settled(app: AppTest) -> AppTest:
    while "background" in app.session_state:
        worker = app.session_state["background"]
        worker.join()
        if not worker.to_draw():
            break
        app.run()
    return app


def shown(text: str) -> str:
    """What a visitor reads in a Markdown element: the dashboard escapes echoed text (``dashboard.text.literal``)."""
    return re.sub(r"\\(.)", r"\1", text).replace("\u2060", "")


def chart_specs(app: AppTest) -> list[str]:
    """Each chart's figure as the JSON the page sent to the browser (``dashboard.plot``)."""
    return [json.loads(element.proto.json)["figure"] for element in app.get("bidi_component")]


def charts(app: AppTest) -> list[dict]:
    return [json.loads(spec) for spec in chart_specs(app)]


def decode(values) -> list[float]:
    """Plotly's JSON arrays, plain or base64 ("bdata" with a dtype)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def z_values(app: AppTest) -> list[float]:
    return decode(charts(app)[0]["data"][0]["y"])


@pytest.mark.parametrize("page, n_charts", [("pages/triage.py", 1), ("pages/readout.py", 6),
                                            ("pages/capacity.py", 4)])
def test_every_page_on_a_tiny_untied_model(tiny_models, page, n_charts):
    app = run_page(page, model=tiny_models[("gpt_neox", False)], n_tokens=128)
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    assert len(charts(app)) >= n_charts
    # the session's background work ran (its visitor is there) and the page drew what it brought
    assert not [c for c in charts(app) if "Preview" in c["layout"].get("title", {}).get("text", "")]


def test_moving_k_changes_the_plotted_z(tiny_models):
    app = run_page("pages/readout.py", model=tiny_models[("llama", True)], n_tokens=128)
    before = z_values(app)
    assert len(before) == 4  # embeddings + 3 blocks
    slider = next(s for s in app.select_slider if s.label.startswith("k "))
    slider.set_value(4).run()
    assert not app.exception
    after = z_values(app)
    assert after != before and app.query_params["k"] == "4"
    app.multiselect[0].set_value([1, 5]).run()
    overlay = next(c for c in charts(app) if "several CCR" in c["layout"]["title"]["text"])
    assert [trace["name"] for trace in overlay["data"]] == ["CCR-1", "CCR-5", "null mean +- 2 sd"]  # the band last


def test_a_chart_keeps_its_element_when_its_figure_changes():
    """``dashboard.plot``: the browser updates a chart in place only if its element stays the same one (Streamlit's
    own ``plotly_chart`` names it by the figure: a new element at every change)."""
    def page():
        import plotly.graph_objects as go
        import streamlit as st

        from dashboard.plot import plot
        plot(go.Figure(go.Scatter(y=[1, st.session_state.get("y", 2)]), dict(title="chart")), "chart-z")

    app = AppTest.from_function(page).run()
    first = app.get("bidi_component")[0].proto
    app.session_state["y"] = 3
    second = app.run().get("bidi_component")[0].proto
    assert first.id == second.id and first.json != second.json
    assert decode(charts(app)[0]["data"][0]["y"]) == [1, 3]
    from dashboard.plot import gzipped_plotly_js

    gzipped = gzipped_plotly_js()
    assert json.loads(second.json)["plotly_js"] == f"/component/dashboard.plot.plotly_js/{gzipped.name}"  # the browser
    # tests find it served: every chart they wait for is drawn by it
    assert gzip.decompress(gzipped.read_bytes()) == (files("plotly") / "package_data" / "plotly.min.js").read_bytes()


def test_the_setting_just_left_is_not_previewed_ahead(tiny_models, monkeypatch):
    """Its exact curve is stored (a move back reads it): the previews ahead after a move skip it, and preview the
    settings that have none."""
    from analysis.runs import analyses

    app = run_page("pages/readout.py", model=tiny_models[("llama", True)], n_tokens=128)
    previewed, model_pga = [], analyses.model_pga

    def recording(loaded, corpus, sampling, settings=None, *args, **kwargs):
        if settings is not None and settings.preview:
            previewed.append((settings.ks, settings.ccrs))
        return model_pga(loaded, corpus, sampling, settings, *args, **kwargs)

    monkeypatch.setattr(analyses, "model_pga", recording)
    slider = next(s for s in app.select_slider if s.label.startswith("k "))
    left = slider.value
    settled(slider.set_value(4).run())
    assert not app.exception and left != 4
    assert previewed and ((left,), (1,)) not in previewed


def test_bad_inputs_are_messages_not_tracebacks(tiny_models, tmp_path):
    app = run_page("pages/triage.py", model=tmp_path / "no" / "such" / "model")  # inside the allowed roots
    assert not app.exception and "no such file or folder" in app.error[0].value
    short = tmp_path / "short.txt"
    short.write_text("A few words of text, far too few for the sample. " * 20)
    app = run_page("pages/readout.py", model=tiny_models[("gpt2", False)], corpus=short, n_tokens=512)
    assert not app.exception and "corpus allows at most" in app.error[0].value
    empty = tmp_path / "empty.txt"
    empty.write_text("  \n")
    app = run_page("pages/triage.py", model=tiny_models[("gpt2", False)], corpus=empty)
    assert not app.exception and "is empty" in app.error[0].value


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_every_page_on_the_builtin_model(page):
    app = run_page(page, n_tokens=128)
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    assert charts(app)


@pytest.mark.slow  # runs the built-in model (shares its cache with the tests below)
def test_demo_mode_fixes_models_and_limits(tiny_models, monkeypatch):
    monkeypatch.setenv("RG_DEMO", "1")
    app = run_page("pages/triage.py", model=tiny_models[("gpt_neox", False)], n_tokens=128, corpus="/etc/hosts")
    assert not app.exception
    assert app.sidebar.selectbox[0].options == ["Built-in default", "Known Hub model"]
    assert app.sidebar.selectbox[0].value == "Built-in default"  # a free path is not allowed in demo mode
    assert app.sidebar.selectbox[1].options == ["Built-in (Python help topics)", "Upload a .txt or .jsonl"]
    n_slider = next(s for s in app.sidebar.select_slider if s.label.startswith("N token"))
    assert max(int(o) for o in n_slider.options) == 1024 and n_slider.value == 128
    assert "Demo mode" in app.sidebar.caption[-1].value


def test_across_training_page_on_a_checkpoint_folder(tiny_models, tmp_path):
    import shutil

    for name in ("checkpoint-1", "checkpoint-2", "checkpoint-3"):
        shutil.copytree(tiny_models[("gpt_neox", False)], tmp_path / "run" / name)
    app = run_page("pages/training.py", model=tmp_path / "run", n_tokens=128)
    assert not app.exception, app.exception
    assert len(app.warning) == 2  # checkpoints 2 and 3 repeat the weights of checkpoint 1
    figure = charts(app)[0]
    assert len(decode(figure["data"][0]["z"])) > 0


def test_training_page_without_checkpoints_offers_the_demo(tiny_models):
    app = run_page("pages/training.py", model=tiny_models[("gpt2", True)], n_tokens=128)
    assert not app.exception and "no training checkpoints" in app.info[0].value
    assert app.button[0].label == "Train the demo series"


@pytest.mark.parametrize("page", ["pages/models.py", "pages/probes.py", "pages/token_map.py"])
def test_issue6_pages_on_a_tiny_model(tiny_models, page, monkeypatch):
    from analysis.runs import analyses

    series_previews = []
    monkeypatch.setattr(analyses, "checkpoint_series", lambda *args, real=analyses.checkpoint_series, **kwargs:
                        series_previews.append(kwargs.get("preview", False)) or real(*args, **kwargs))
    app = run_page(page, model=tiny_models[("llama", False)], n_tokens=128, seed=29)  # a seed no other test stores
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    assert charts(app)
    if page == "pages/models.py":  # previewed first (after the model's forward pass alone), then redrawn exact
        assert True in series_previews and series_previews[-1] is False
        assert charts(app)[0]["layout"]["title"]["text"] == "z against relative depth"


def test_sweep_results_appear_without_loading_the_models(series, tmp_path, monkeypatch):
    import shutil

    from analysis.runs.backends import LocalBackend
    from analysis.runs.plan import parse_plan
    from analysis.runs.series import stored_series
    from analysis.runs.sweep import run_sweep
    from analysis.storage.store import ResultStore

    shutil.copytree(series, tmp_path / "run")
    plan = parse_plan({"models": [{"model": str(tmp_path / "run"), "revisions": "all"}], "n_tokens": 48, "k": [8],
                       "ccr": [0, 1], "null_subspaces": 10, "dtype": "float32"})
    store = ResultStore(tmp_path / "store")
    assert run_sweep(plan, LocalBackend("cpu"), store, cache_dir=str(tmp_path / "cache")).ok
    shutil.rmtree(tmp_path / "run")  # the pages must read the store, not the models
    monkeypatch.setenv("RG_STORE", str(tmp_path / "store"))
    (stored,) = stored_series(store)
    expected = np.array([[x.z for x in r.at(8, 0)] for r in stored.results])

    app = run_page("pages/training.py")
    assert not app.exception, app.exception
    assert not app.error, [e.value for e in app.error]
    assert app.radio[0].value == "Sweep results" and app.selectbox[0].value == str(tmp_path / "run")
    heatmap = np.asarray(decode(charts(app)[0]["data"][0]["z"]), dtype=float).ravel()
    assert np.allclose(np.sort(heatmap), np.sort(expected.ravel()))

    app = run_page("pages/models.py")
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert np.allclose(decode(charts(app)[0]["data"][0]["y"]), expected[-1])
