import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args, env: dict | None = None):
    return subprocess.run([sys.executable, "-m", "analysis", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})


def test_model_info_json_on_a_checkpoint_series(neox_folder, tmp_path):
    import shutil

    for name in ("checkpoint-5", "checkpoint-50"):
        shutil.copytree(neox_folder, tmp_path / "run" / name)
    result = run_cli("model-info", str(tmp_path / "run"), "--revision", "5", "--json")
    assert result.returncode == 0, result.stderr
    info = json.loads(result.stdout)
    assert info["n_layers"] == 3 and info["d_model"] == 32 and info["vocab_size"] == 512
    assert info["tied_embeddings"] is False and info["architecture"] == "GPTNeoXForCausalLM"
    assert info["identity"].startswith("sha256:") and info["checkpoints"] == [5, 50]


def test_hidden_states_writes_the_array(tiny_models, tmp_path):
    out = tmp_path / "h.npy"
    result = run_cli("hidden-states", str(tiny_models[("llama", True)]), "--n-tokens", "40",
                     "--window", "32", "--device", "cpu", "--out", str(out), "--prenorm-out",
                     str(tmp_path / "p.npy"))
    assert result.returncode == 0, result.stderr
    assert np.load(out).shape == (4, 40, 32) and np.load(tmp_path / "p.npy").shape == (40, 32)


def test_bad_input_exits_2_with_a_message(neox_folder):
    result = run_cli("model-info", "./no-such-model")
    assert result.returncode == 2 and "no such file or folder" in result.stderr
    assert "Traceback" not in result.stderr
    result = run_cli("hidden-states", str(neox_folder), "--n-tokens", "100000000", "--out", "/tmp/x.npy")
    assert result.returncode == 2 and "corpus allows at most" in result.stderr


def test_pga_json_contract_from_arrays(tmp_path):
    from analysis.geometry.synthetic import planted_readout

    states, w_u = planted_readout(n=80)
    np.save(tmp_path / "H.npy", np.stack([states, states]))
    np.save(tmp_path / "W.npy", w_u)
    result = run_cli("pga", "--hidden", str(tmp_path / "H.npy"), "--unembedding", str(tmp_path / "W.npy"),
                     "--k", "8,4", "--ccr", "0,1", "--n-null", "20", "--json", str(tmp_path / "out.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert (out["n_tokens"], out["n_pairs"], out["n_null"], out["seed"]) == (80, 3160, 20, 0)
    assert [(r["k"], r["ccr"]) for r in out["runs"]] == [(8, 0), (8, 1), (4, 0), (4, 1)]
    keys = {"layer", "z", "rho_readout", "null_mean", "null_std", "p_value", "pc1_angle_deg", "rankme",
            "alpha_req", "isotropy", "condition_number"}
    for run in out["runs"]:
        assert [layer["layer"] for layer in run["layers"]] == [0, 1]
        assert all(keys <= set(layer) for layer in run["layers"])
    assert out["runs"][0]["layers"][0]["z"] > 3


def test_pga_on_a_model_and_bad_k(neox_folder, tmp_path):
    result = run_cli("pga", str(neox_folder), "--n-tokens", "64", "--window", "32", "--k", "8",
                     "--layers", "0,-1", "--n-null", "10", "--json", str(tmp_path / "m.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "m.json").read_text())
    assert out["identity"].startswith("sha256:") and [x["layer"] for x in out["runs"][0]["layers"]] == [0, 3]
    result = run_cli("pga", str(neox_folder), "--n-tokens", "64", "--k", "33", "--json", "-")
    assert result.returncode == 2 and "k = 33 is out of range" in result.stderr


def test_capacity_formulas_json():
    result = run_cli("capacity", "--d", "4096", "--eps", "0.0645", "--json")
    assert result.returncode == 0, result.stderr
    out = json.loads(result.stdout)
    assert (out["d"], out["eps"], out["class"]) == (4096, 0.0645, "Class 2")
    assert round(out["capacity"]["jl_proven"], 1) == 8.4 and out["capacity"]["extrapolated"] is True
    assert set(out["capacity"]) == {"full", "adjusted", "jl_proven", "jl_fitted", "extrapolated", "status"}
    bad = run_cli("capacity", "--d", "0", "--eps", "0.1")
    assert bad.returncode == 2 and "d must be at least 1" in bad.stderr


def test_capacity_of_a_model_json(tiny_models, tmp_path):
    result = run_cli("capacity", str(tiny_models[("gpt_neox", False)]), "--matrix", "unembedding",
                     "--json", str(tmp_path / "c.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "c.json").read_text())
    assert (out["n_rows"], out["d_model"], out["tied_embeddings"]) == (512, 32, False)
    assert out["eps"] == out["mu"] + 2 * out["sigma"]
    assert len(out["histogram"]["edges"]) == 301 and sum(out["histogram"]["counts"]) == 512 * 511 // 2


def test_packing_json_with_fit(tmp_path):
    result = run_cli("packing", "--d", "16,32", "--k", "100,200", "--trials", "3", "--fit", "--device", "cpu",
                     "--json", str(tmp_path / "p.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "p.json").read_text())
    assert [(c["d"], c["k"], c["method"]) for c in out["cells"]] == [
        (16, 100, "random"), (16, 200, "random"), (32, 100, "random"), (32, 200, "random")]
    assert {"C", "r2", "mape", "nrmse"} <= set(out["fit"]["jl"])


@pytest.mark.slow  # trains and sweeps a demo series through the CLI (~40 s)
def test_issue6_commands_on_a_demo_series(tmp_path, tiny_models):
    demo = run_cli("train-demo", "--out", str(tmp_path / "demo"), "--widths", "16", "--steps", "4", "--json")
    assert demo.returncode == 0, demo.stderr
    assert json.loads(demo.stdout)["checkpoint_steps"] == [0, 1, 2, 4]
    series = str(tmp_path / "demo" / "neox-d16")
    listed = json.loads(run_cli("checkpoints", series, "--json").stdout)
    assert [c["step"] for c in listed["checkpoints"]] == [0, 1, 2, 4]
    sweep = run_cli("training-sweep", series, "--revisions", "checkpoint-0,checkpoint-4", "--n-tokens", "64",
                    "--window", "32", "--k", "8", "--n-null", "5", "--device", "cpu",
                    "--json", str(tmp_path / "s.json"))
    assert sweep.returncode == 0, sweep.stderr
    out = json.loads((tmp_path / "s.json").read_text())
    assert [c["step"] for c in out["checkpoints"]] == [0, 4] and len(out["checkpoints"][0]["layers"]) == 5
    model = str(tiny_models[("llama", False)])
    converge = run_cli("convergence", model, model, "--units", "30", "--k", "8", "--n-null", "5", "--device", "cpu")
    assert converge.returncode == 0, converge.stderr
    assert all(abs(p["full"] - 1) < 1e-9 for p in json.loads(converge.stdout)["pairs"])
    probe = run_cli("probe", model, "--device", "cpu")
    assert probe.returncode == 0, probe.stderr
    result = json.loads(probe.stdout)
    assert len(result["accuracy"]) == 4 and result["baseline"] < 0.5 and result["classes"][0] == "compound"
    missing = run_cli("training-sweep", series, "--revisions", "checkpoint-3")
    assert missing.returncode == 2 and "'checkpoint-3' is not in" in missing.stderr
