"""The one door (``analysis.runs.analyses``): defaults from one place, and the drifts it closed."""

import json

import numpy as np
import pytest
import torch
from transformers import AutoModelForCausalLM

from analysis.data.corpus import Sampling, builtin_corpus
from analysis.geometry.pga import PGASettings
from analysis.results import figures
from analysis.results.collections import DepthCurves
from analysis.runs import analyses
from analysis.runs.settings import Compute, ModelChoice, clip_epsilon, k_grid, pga_settings, snap_k
from analysis.storage.cache import ResultCache
from tests.test_app import charts, run_page, shown
from tests.test_cli import run_cli

CPU = Compute(device="cpu")


def test_model_choice_parses_a_revision():
    assert ModelChoice.parse(" /runs/a@checkpoint-16 ") == ModelChoice("/runs/a", "checkpoint-16")
    assert ModelChoice.parse("EleutherAI/pythia-70m").revision is None
    assert ModelChoice("m", "step1").label == "m@step1"


def test_k_defaults_to_a_quarter_of_d_at_most_100():
    assert pga_settings(32).ks == (8,) and pga_settings(576).ks == (100,) and pga_settings(4096).ks == (100,)
    assert pga_settings(32, (4, 8)).ks == (4, 8)
    with pytest.raises(TypeError):
        PGASettings()  # no second default for k


def test_convergence_compares_the_revisions_it_is_given(series, tmp_path):
    """Two checkpoints of one run are two models (the models page used to drop the revision)."""
    cache = ResultCache(tmp_path)
    early, late = ModelChoice(str(series), "checkpoint-0"), ModelChoice(str(series), "checkpoint-20")
    run = analyses.model_convergence(early, late, builtin_corpus(), units=30, n_null=5, compute=CPU, cache=cache)
    assert run.model_a.endswith("@checkpoint-0") and run.model_b.endswith("@checkpoint-20")
    assert run.identities[0] != run.identities[1]
    assert max(abs(r.full - 1) for r in run.results) > 0.01
    same = analyses.model_convergence(early, early, builtin_corpus(), units=30, n_null=5, compute=CPU, cache=cache)
    assert all(abs(r.full - 1) < 1e-9 for r in same.results)


def test_models_page_keeps_each_revision(series, neox_folder):
    app = run_page("pages/models.py", model=neox_folder, n_tokens=128)
    app.text_area[0].set_value(f"{series}@checkpoint-0\n{series}@checkpoint-20").run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    convergence = next(c for c in charts(app) if c["layout"]["title"]["text"] == "Cross-model convergence")
    full = next(trace for trace in convergence["data"] if trace["name"] == "full spaces")
    assert max(abs(value - 1) for value in full["y"]) > 0.01


def test_training_sweep_defaults_k_to_a_quarter_of_d(series, tmp_path):
    result = run_cli("training-sweep", str(series), "--revisions", "checkpoint-0", "--n-tokens", "48", "--window",
                     "32", "--n-null", "5", "--device", "cpu", "--json", str(tmp_path / "s.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "s.json").read_text())
    assert out["settings"]["ks"] == [8] and {x["k"] for x in out["checkpoints"][0]["layers"]} == {8}


@pytest.fixture(scope="module")
def antipodal(tiny_models, tmp_path_factory):
    """A model whose embedding rows are +v or -v: mu + 2 sigma is about 2, beyond the formulas' domain."""
    model = AutoModelForCausalLM.from_pretrained(tiny_models[("gpt_neox", False)])
    weight = model.get_input_embeddings().weight
    with torch.no_grad():
        signs = torch.tensor([1.0, -1.0]).repeat(len(weight) // 2)[:, None]
        weight.copy_(signs * torch.randn(1, weight.shape[1]))
    folder = tmp_path_factory.mktemp("antipodal")
    model.save_pretrained(folder)
    return folder


def test_epsilon_is_clipped_in_one_place(antipodal):
    assert clip_epsilon(-0.3) == 1e-6 and clip_epsilon(2.0) == 1.0 and clip_epsilon(0.07) == 0.07
    run = analyses.model_capacity(ModelChoice(str(antipodal)), device="cpu")
    assert run.geometry.stats.epsilon > 1.5 and run.report.eps == 1.0 and run.report.model_class == "Class 1"
    cli = run_cli("capacity", str(antipodal), "--json")
    assert cli.returncode == 0, cli.stderr  # the CLI clamped differently and refused this model
    out = json.loads(cli.stdout)
    assert out["eps"] == run.report.eps and out["epsilon"] == pytest.approx(run.geometry.stats.epsilon)


def test_probe_caption_states_the_k_it_used(tiny_models):
    app = run_page("pages/probes.py", model=tiny_models[("llama", False)], n_tokens=128)
    assert not app.exception and not app.error
    caption = " ".join(shown(c.value) for c in app.caption)
    assert "k = 8" in caption and "k = 100" not in caption and "R = 100" in caption


def test_no_series_is_dropped():
    curves = {f"model {i}": [] for i in range(13)}
    assert len(figures.z_by_layer(curves).data) == 13
    assert len(figures.colours(13)) == 13 and figures.colours(13)[10] == figures.colours(13)[0]


def test_models_page_draws_every_model_given(tiny_models, series):
    lines = [str(folder) for folder in tiny_models.values()] + [f"{series}@checkpoint-10"]
    app = run_page("pages/models.py", model=lines[0], n_tokens=128)
    app.text_area[0].set_value("\n".join(lines)).run()
    assert not app.exception and not app.error, [e.value for e in app.error]
    depth = next(c for c in charts(app) if c["layout"]["title"]["text"] == "z against relative depth")
    assert len(depth["data"]) == 7 and len({trace["line"]["color"] for trace in depth["data"]}) == 7


def test_results_give_their_tables_with_the_settings_used(neox_folder, tmp_path):
    cache = ResultCache(tmp_path)
    loaded = analyses.open_model(ModelChoice(str(neox_folder)), CPU)
    run = analyses.model_pga(loaded, builtin_corpus(), Sampling(64, window=32), compute=CPU, cache=cache,
                             settings=pga_settings(32, ccrs=(0, 1), n_null=10))
    table = run.table()
    assert len(table) == 4 * 2 and set(table.k) == {8} and set(table.ccr) == {0, 1}
    assert np.allclose(table.z, [r.z for r in run.results])
    assert "k = 8, CCR-0, R = 10 random subspaces" in run.describe(8, 0)
    assert "k = 8, CCR 0, 1, R = 10" in run.describe()
    curves = DepthCurves({"a": run.at(8, 0), "b": run.at(8, 1)})
    assert list(curves.table().relative_depth[:4]) == [0, 1 / 3, 2 / 3, 1]
    assert run.to_json()["runs"][1]["ccr"] == 1


@pytest.mark.parametrize("d", [8, 32, 576, 4096])
def test_the_k_grid_is_worth_sliding(d):
    grid = k_grid(d)
    assert list(grid) == sorted(set(grid)) and grid[-1] == d // 2 and d not in grid
    assert pga_settings(d).ks[0] in grid and all(b / a <= 2 for a, b in zip(grid, grid[1:], strict=False))
    assert snap_k(d, grid) == d // 2 and snap_k(0, grid) == 1 and snap_k(grid[2], grid) == grid[2]


def test_a_k_in_the_link_snaps_to_the_grid_with_a_note(tiny_models):
    app = run_page("pages/readout.py", model=tiny_models[("gpt_neox", False)], n_tokens=128, k=13)
    assert not app.exception and not app.error
    slider = next(s for s in app.select_slider if s.label.startswith("k "))
    assert slider.value == 16 and app.query_params["k"] == "16"
    assert any("k = 13 from the link is not on the slider's grid; showing k = 16" in c.value for c in app.caption)
