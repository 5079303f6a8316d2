import shutil

import pytest
import torch
from huggingface_hub import constants

from analysis.errors import InputError
from analysis.models import hub
from analysis.models.refs import PYTHIA_STEPS, list_checkpoints, resolve

SHA = "0123456789abcdef0123456789abcdef01234567"


def test_local_folder_identity_is_a_content_hash(neox_folder, tmp_path):
    ref = resolve(str(neox_folder))
    assert ref.kind == "local" and ref.identity.startswith("sha256:") and len(ref.identity) == 71
    assert resolve(str(neox_folder)).identity == ref.identity
    copy = shutil.copytree(neox_folder, tmp_path / "copy")
    assert resolve(str(copy)).identity == ref.identity  # the same weights, wherever they lie
    from safetensors.torch import load_file, save_file

    weights = load_file(copy / "model.safetensors")
    name = next(iter(weights))
    weights[name] = weights[name] + 1.0
    save_file(weights, copy / "model.safetensors", metadata={"format": "pt"})
    assert resolve(str(copy)).identity != ref.identity


def _series(root, folder, names):
    for name in names:
        shutil.copytree(folder, root / name)
    return root


def test_checkpoint_folder_lists_by_step_and_selects(neox_folder, tmp_path):
    series = _series(tmp_path / "run", neox_folder, ["checkpoint-100", "checkpoint-20", "checkpoint-3"])
    assert [c.step for c in list_checkpoints(str(series))] == [3, 20, 100]
    assert resolve(str(series)).step == 100  # the last by default
    for revision in ("checkpoint-20", "step20", "20"):
        ref = resolve(str(series), revision)
        assert (ref.kind, ref.step, ref.path.name) == ("checkpoint", 20, "checkpoint-20")
    with pytest.raises(InputError, match="'checkpoint-7' is not in .*checkpoint-3, checkpoint-20"):
        resolve(str(series), "checkpoint-7")


def test_step_subfolders_are_checkpoints_too(neox_folder, tmp_path):
    series = _series(tmp_path / "run", neox_folder, ["step1000", "step0", "step512"])
    assert [c.revision for c in list_checkpoints(str(series))] == ["step0", "step512", "step1000"]


def test_folder_without_weights_or_config(tmp_path, neox_folder):
    with pytest.raises(InputError, match="no config.json"):
        resolve(str(tmp_path))
    bare = tmp_path / "bare"
    bare.mkdir()
    shutil.copy(neox_folder / "config.json", bare)
    with pytest.raises(InputError, match="no weight files"):
        resolve(str(bare))


def test_pickled_weights_need_opt_in(tmp_path, neox_folder):
    folder = tmp_path / "pickled"
    folder.mkdir()
    shutil.copy(neox_folder / "config.json", folder)
    torch.save({"w": torch.zeros(2)}, folder / "pytorch_model.bin")
    with pytest.raises(InputError, match="pickled .bin weights.*--allow-pickle"):
        resolve(str(folder))
    assert resolve(str(folder), allow_pickle=True).kind == "local"


@pytest.mark.parametrize("name", ["./missing-folder", "/no/such/model.gguf", "not a hub id!"])
def test_missing_paths_and_bad_ids(name):
    with pytest.raises(InputError, match="no such file or folder"):
        resolve(name)


def test_non_gguf_file_is_refused(tmp_path):
    path = tmp_path / "weights.txt"
    path.write_text("x")
    with pytest.raises(InputError, match="not a .gguf file"):
        resolve(str(path))


def _fake_hub_cache(root, folder, repo="acme/tiny", ref="main"):
    """Lay out a Hugging Face cache the way huggingface_hub writes one."""
    base = root / f"models--{repo.replace('/', '--')}"
    shutil.copytree(folder, base / "snapshots" / SHA)
    (base / "refs").mkdir(parents=True)
    (base / "refs" / ref).write_text(SHA)
    return root


def test_hub_offline_uses_the_local_cache_for_that_sha(neox_folder, tmp_path, monkeypatch):
    cache = _fake_hub_cache(tmp_path / "hf", neox_folder, ref="step1000")
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(cache))
    for revision in ("step1000", SHA):
        ref = resolve("acme/tiny", revision)
        assert (ref.kind, ref.identity, ref.step) == ("hub", SHA, 1000 if revision == "step1000" else None)
        assert (ref.path / "config.json").exists()
    assert hub.cached_commit("acme/tiny", "main", cache) is None


def test_hub_out_of_reach_with_nothing_cached_says_what_to_do(tmp_path, monkeypatch):
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path))

    def unreachable(*_args, **_kwargs):
        raise ConnectionError("Name or service not known")

    monkeypatch.setattr(hub.HfApi, "model_info", unreachable)
    with pytest.raises(InputError, match="out of reach.*'EleutherAI/pythia-70m'.*'step1000'.*Connect"):
        resolve("EleutherAI/pythia-70m", "step1000")


def test_hub_unknown_model_and_revision(monkeypatch):
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    for error, pattern in [(RepositoryNotFoundError, "does not exist on the Hugging Face Hub"),
                           (RevisionNotFoundError, "Revision 'step7' does not exist")]:
        def answer(*_args, error=error, **_kwargs):
            instance = error.__new__(error)  # as raised by the Hub, without an HTTP response object
            Exception.__init__(instance, "404")
            raise instance

        monkeypatch.setattr(hub.HfApi, "model_info", answer)
        with pytest.raises(InputError, match=pattern):
            resolve("acme/nothing", "step7")


def test_pythia_schedule_is_the_fallback_listing():
    assert len(PYTHIA_STEPS) == 154 and PYTHIA_STEPS[:3] == (0, 1, 2) and PYTHIA_STEPS[-1] == 143000
    steps = [c.step for c in list_checkpoints("EleutherAI/pythia-410m")]
    assert steps == list(PYTHIA_STEPS)
    assert list_checkpoints("smollm2-135m") == []
