"""Triage that travels: the HTML report (CLI and app write the same file), batch triage, side by side."""

import json
import re

import numpy as np
import pytest

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.models.tiny import save_tiny_model
from analysis.runs import analyses
from analysis.runs.settings import Compute, ModelChoice
from tests.test_app import charts, decode, run_page
from tests.test_browser import CHROMEDRIVER, CHROMIUM, screenshot
from tests.test_cli import run_cli

CPU = Compute(device="cpu")


@pytest.fixture(scope="module")
def reports(series, tmp_path_factory):
    """Batch triage of two checkpoints and one reference that does not exist."""
    out = tmp_path_factory.mktemp("reports")
    result = run_cli("report", f"{series}@checkpoint-0", f"{series}@checkpoint-20", str(out / "no-such-model"),
                     "--n-tokens", "128", "--device", "cpu", "--out", str(out), "--json")
    return out, result


def test_batch_triage_writes_the_good_reports_and_names_the_bad_one(reports):
    out, result = reports
    assert result.returncode == 1  # not all succeeded
    summary = json.loads(result.stdout)
    assert [r["model"].rsplit("@", 1)[1] for r in summary["reports"]] == ["checkpoint-0", "checkpoint-20"]
    assert [f["model"] for f in summary["failed"]] == [str(out / "no-such-model")]
    assert "no-such-model" in result.stderr and "failed:" in result.stderr
    assert sorted(p.name for p in out.glob("*.html")) == ["neox@checkpoint-0.html", "neox@checkpoint-20.html"]
    verdict = summary["reports"][0]["verdict"]
    assert {"regime", "peak_z", "lowest_z", "epsilon", "class", "k", "n_tokens"} <= set(verdict)
    assert verdict["k"] == 8 and verdict["n_tokens"] == 128


def test_a_report_names_its_weights_and_is_self_contained(reports):
    out, result = reports
    entry = json.loads(result.stdout)["reports"][0]
    page = (out / "neox@checkpoint-0.html").read_text()
    assert entry["identity"].startswith("sha256:") and entry["identity"] in page
    for heading in ("Verdict", "Readout alignment", "Embedding geometry and capacity", "Provenance"):
        assert f"<h2>{heading}</h2>" in page
    assert "CCR-10" in page and "epsilon = mu + 2 sigma" in page and "R null subspaces" in page
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # the page around the inline scripts
    assert "<script src=" not in page and "http" not in markup  # nothing to fetch


def test_the_app_and_the_cli_write_the_same_report(reports, series):
    out, _ = reports
    loaded = analyses.open_model(ModelChoice(str(series), "checkpoint-0"), CPU)
    report = analyses.model_report(loaded, builtin_corpus(), Sampling(128), CPU)
    assert report.file_name == "neox@checkpoint-0.html"
    assert report.html() == (out / report.file_name).read_text()


def test_the_triage_page_offers_the_report(series):
    app = run_page("pages/triage.py", model=series, revision="checkpoint-0", n_tokens=128)
    assert not app.exception and not app.error
    assert any(d.label == "Download report" for d in app.get("download_button"))


@pytest.mark.slow
@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver")
def test_a_report_opens_offline_in_chromium_and_draws_its_charts(reports, tmp_path):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service
    from selenium.webdriver.support.ui import WebDriverWait

    out, _ = reports
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                 "--window-size=1200,2400", "--proxy-server=127.0.0.1:9",
                 "--host-resolver-rules=MAP * ~NOTFOUND"):  # no network at all
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.get((out / "neox@checkpoint-0.html").as_uri())
        drawn = "return document.querySelectorAll('.js-plotly-plot .main-svg').length;"
        WebDriverWait(driver, 60, poll_frequency=0.25).until(lambda d: d.execute_script(drawn) >= 5)
        names = driver.execute_script("return document.getElementById('z-by-layer')._fullData.map(t => t.name);")
        assert names == ["CCR-1", "CCR-5", "CCR-10", "null mean +- 2 sd"]  # the curves, then the band's legend entry
        toolbar = driver.execute_script("return [...document.querySelectorAll('#z-by-layer .modebar-btn')]"
                                        ".map(b => b.getAttribute('data-title'));")
        assert "Download plot as a PNG" in toolbar and "Share chart..." not in toolbar  # no upload to Plotly's cloud
        assert screenshot(driver, "report", tmp_path).stat().st_size > 10_000
    finally:
        driver.quit()


def test_side_by_side_of_two_checkpoints_and_the_link_that_restores_it(series, monkeypatch, tmp_path):
    from analysis.runs import analyses

    # a results cache of its own: results are keyed by the weights, and other tests store triages of the same weights
    monkeypatch.setenv("RG_CACHE_DIR", str(tmp_path / "cache"))
    previews = []  # whether each triage asked was a preview, and whether it came back one
    monkeypatch.setattr(analyses, "model_triage", lambda *args, real=analyses.model_triage, **kwargs: previews.append(
        (kwargs.get("preview", False), (run := real(*args, **kwargs)).pga.preview)) or run)
    opened = []  # the models loaded for a side
    monkeypatch.setattr(analyses, "open_model", lambda choice, *args, real=analyses.open_model: opened.append(
        choice.label) or real(choice, *args))
    a, b = f"{series}@checkpoint-0", f"{series}@checkpoint-20"
    app = run_page("pages/compare.py", model=series, revision="checkpoint-20", n_tokens=128, a=a, b=b)
    assert not app.exception and not app.error, [e.value for e in app.error]
    assert previews == [(True, True), (True, True), (False, False), (False, False)]  # drawn first, then exact
    assert opened == [a, a]  # B is the sidebar's model: the resident one, loaded for no side
    assert charts(app)[0]["layout"]["title"]["text"] == "z against relative depth"
    assert [m.label for m in app.metric].count("Peak z") == 2
    z_chart = charts(app)[0]
    assert [trace["name"] for trace in z_chart["data"]] == [f"A: {a}", f"B: {b}"]
    first, second = (np.array(decode(trace["y"])) for trace in z_chart["data"])
    assert len(first) == len(second) == 4 and not np.allclose(first, second)
    assert any("z of B minus z of A" in c["layout"]["title"]["text"] for c in charts(app))  # same layer grid
    atlas = next(c for c in charts(app) if "45 published models" in c["layout"]["title"]["text"])
    assert [t["name"] for t in atlas["data"] if t["marker"].get("symbol") == "star"] == [f"A: {a}", f"B: {b}"]
    link = {key: app.query_params[key] for key in ("a", "b")}
    assert link == {"a": a, "b": b}
    again = run_page("pages/compare.py", model=series, n_tokens=128, **link)
    assert charts(again)[0]["data"] == z_chart["data"]


def test_side_by_side_of_different_depths_has_no_difference(tiny_models, tokenizer, tmp_path):
    deeper = save_tiny_model(tmp_path / "deeper", "gpt_neox", tokenizer, n_layers=5)
    app = run_page("pages/compare.py", model=tiny_models[("gpt_neox", False)], n_tokens=128,
                   a=tiny_models[("gpt_neox", False)], b=deeper)
    assert not app.exception and not app.error
    assert "layer grids differ" in " ".join(c.value for c in app.caption)
