"""The capacity atlas (the 45 published models), measuring one of them, and the PGA width rule."""

import csv
import json
import shutil
from pathlib import Path

import pytest

from analysis.capacity.atlas import SOURCE, find_published, placement, published_models
from analysis.capacity.formulas import classify
from analysis.geometry.verdict import WidthRule
from analysis.results.glossary import glossary
from tests.test_app import charts, run_page
from tests.test_cli import run_cli

SHIPPED = Path(__file__).resolve().parent.parent / "analysis" / "capacity" / "data" / "published_table1.csv"
# Values as printed in the source (Guha 2026, Table 1 and its worked example), typed here by hand.
PRINTED = {"Llama 2 7B": (4096, "0.06450", 2), "Gemma 7B": (3072, "0.99918", 1), "Qwen 2.5 0.5B": (896, "0.36035", 1),
           "TinyLlama 1.1B": (2048, "0.06329", 2), "Llama 3.1 405B": (16384, "0.04813", 2),
           "Gemma 3 270M": (640, "0.41554", 1)}


def test_the_shipped_table_is_the_published_one_unchanged():
    rows = list(csv.DictReader(SHIPPED.open()))
    models = published_models()
    assert len(rows) == len(models) == 45
    for row, model in zip(rows, models, strict=True):
        assert (model.name, model.hub_id, model.d_model, model.epsilon_printed, model.model_class) == (
            row["name"], row["hub_id"], int(row["d_model"]), row["epsilon"], f"Class {row['class']}")
        assert len(row["epsilon"].split(".")[1]) == 5 and classify(model.epsilon) == model.model_class
    for name, (d_model, epsilon, model_class) in PRINTED.items():
        model = find_published(name)
        assert (model.d_model, model.epsilon_printed, model.model_class) == (d_model, epsilon, f"Class {model_class}")
    assert sum(m.model_class == "Class 1" for m in models) == 14
    assert find_published("meta-llama/llama-2-7b-hf").name == "Llama 2 7B" and find_published("nope") is None


def test_the_atlas_draws_the_45_published_points_and_the_users(neox_folder):
    from analysis.runs import analyses
    from analysis.runs.settings import ModelChoice

    run = analyses.model_capacity(ModelChoice(str(neox_folder)), device="cpu")
    figure = run.atlas_figure()
    published = [trace for trace in figure.data if "published" in trace.name]
    assert [len(trace.x) for trace in published] == [14, 31]
    by_class = {trace.name.split(",")[0]: trace for trace in published}
    for model in published_models():
        trace = by_class[model.model_class]
        index = [row[0] for row in trace.customdata].index(model.name)
        assert (trace.x[index], trace.y[index]) == (model.d_model, float(model.epsilon_printed))  # not recomputed
        assert trace.customdata[index][1] == model.hub_id
        assert ("indeterminate" in trace.customdata[index][2]) == (model.model_class == "Class 1")
    (star,) = [trace for trace in figure.data if trace.name == str(neox_folder)]
    assert star.marker.symbol == "star" and (star.x[0], star.y[0]) == (32, run.geometry.stats.epsilon)
    assert "like 14 of the 45 published models" in run.placement  # the tiny model is Class 1


def test_the_placement_line_counts_the_class():
    assert "Class 2, like 31 of the 45" in placement(4096, 0.05)
    assert "Class 1, like 14 of the 45" in placement(576, 0.73) and "tied embeddings" in placement(576, 0.73)
    assert "none of the 45" in placement(1000, 0.15)


def hub_stand_in(cache: Path, repo_id: str, folder: Path) -> str:
    """A local Hugging Face cache holding ``folder`` as ``repo_id``'s main revision (the Hub's own layout)."""
    sha = "0123456789abcdef0123456789abcdef01234567"
    repo = cache / f"models--{repo_id.replace('/', '--')}"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text(sha)
    shutil.copytree(folder, repo / "snapshots" / sha)
    return sha


def test_measuring_a_published_model_reads_its_embedding_beside_the_published_value(neox_folder, tmp_path):
    published = find_published("TinyLlama 1.1B")
    sha = hub_stand_in(tmp_path / "hub", published.hub_id, neox_folder)
    env = {"HF_HUB_CACHE": str(tmp_path / "hub"), "HF_HUB_OFFLINE": "1"}
    result = run_cli("atlas", "--measure", "TinyLlama 1.1B", "--json", env=env)
    assert result.returncode == 0, result.stderr
    measured = json.loads(result.stdout)
    direct = json.loads(run_cli("capacity", str(neox_folder), "--json").stdout)
    assert measured["epsilon_measured"] == pytest.approx(direct["epsilon"], abs=1e-12)
    assert measured["epsilon_published"] == 0.06329 and measured["identity"] == sha
    assert measured["difference"] == pytest.approx(direct["epsilon"] - 0.06329)
    assert measured["source"] == SOURCE
    text = run_cli("atlas", "--measure", published.hub_id, env=env)
    assert text.returncode == 0 and "published 0.06329" in text.stdout
    unknown = run_cli("atlas", "--measure", "Not A Model")
    assert unknown.returncode == 2 and "not one of the 45 published models" in unknown.stderr


@pytest.mark.parametrize("d_model, regime, agrees, words", [
    (576, "detour", True, "agrees"), (576, "direct", False, "finding about this model"),
    (1024, "mixed", None, "neither agrees nor disagrees"), (2048, "direct", True, "on the aligned side"),
    (4096, "detour", False, "does not agree"), (1536, "detour", None, "predicts neither"),
])
def test_the_width_rule_on_each_side(d_model, regime, agrees, words):
    rule = WidthRule(d_model, regime)
    assert rule.agrees is agrees and words in rule.describe() and "Xu 2026" in rule.describe()


def test_the_verdict_and_its_notes_on_the_triage_page_and_in_the_report(neox_folder):
    notes = glossary()
    assert set(notes) == {"z", "ccr", "epsilon", "capacity", "pc1", "regime"}
    app = run_page("pages/triage.py", model=neox_folder, n_tokens=128)
    assert not app.exception and not app.error and charts(app)
    helps = {metric.proto.help for metric in app.metric}
    assert {notes[key][1] for key in ("z", "ccr", "epsilon", "capacity", "pc1")} <= helps
    assert any(notes["regime"][1] in text for text in helps)
    captions = " ".join(c.value for c in app.caption)
    assert "width rule" in captions and "d_model = 32 is on the detour side" in captions
    assert "like 14 of the 45 published models" in captions


def test_the_width_ladder_orders_the_models_at_hand(tokenizer, tmp_path, monkeypatch):
    from analysis.models import at_hand
    from analysis.models.tiny import save_tiny_model

    wide = save_tiny_model(tmp_path / "wide", "llama", tokenizer, d_model=64)
    narrow = save_tiny_model(tmp_path / "narrow", "gpt2", tokenizer, d_model=16)
    broken = tmp_path / "broken"
    broken.mkdir()
    monkeypatch.setattr(at_hand, "_candidates", lambda: [str(wide), str(broken), str(narrow)])
    assert at_hand.models_at_hand() == [(str(narrow), 16), (str(wide), 64)]
