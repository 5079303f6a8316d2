import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent


def run_cli(*args):
    return subprocess.run([sys.executable, "-m", "analysis", *args], capture_output=True, text=True,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


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
