import numpy as np
import pytest
import torch

from analysis.activations.hidden import extract, hidden_states, token_sample
from analysis.data.corpus import Sampling, builtin_corpus
from analysis.errors import InputError
from analysis.models import arch
from analysis.models.loading import load
from analysis.models.refs import resolve
from analysis.storage.cache import ResultCache

SAMPLING = Sampling(n_tokens=96, window=32, skip=2, per_window=8, seed=0)


@pytest.fixture(scope="module")
def corpus():
    return builtin_corpus()


@pytest.mark.parametrize("family", ["gpt_neox", "llama", "gpt2"])
@pytest.mark.parametrize("tied", [False, True])
def test_states_match_a_plain_forward_and_the_norm_convention(tiny_models, corpus, family, tied, tmp_path):
    loaded = load(resolve(str(tiny_models[(family, tied)])), device="cpu", dtype="float32")
    assert loaded.anatomy.tied_embeddings is tied
    sample = token_sample(loaded, corpus, SAMPLING, ResultCache(tmp_path))
    result = extract(loaded, sample, batch_size=5)
    n_layers, d = loaded.anatomy.n_layers, loaded.anatomy.d_model
    assert result.states.shape == (n_layers + 1, 96, d) and result.states.dtype == np.float32

    with torch.inference_mode():  # reference: one sequence at a time, full model with its LM head
        for w, window in enumerate(sample.windows):
            out = loaded.model(torch.as_tensor(window)[None], output_hidden_states=True)
            mine = np.flatnonzero(sample.rows == w)
            for layer, hidden in enumerate(out.hidden_states):
                np.testing.assert_allclose(result.states[layer, mine], hidden[0, sample.cols[mine]].numpy(),
                                           rtol=1e-4, atol=1e-4)
        # states[-1] is the final-normed stream; last_prenorm is its input
        normed = arch.final_norm(loaded.model)(torch.as_tensor(result.last_prenorm)).numpy()
        np.testing.assert_allclose(result.states[-1], normed, rtol=1e-4, atol=1e-5)
        assert not np.allclose(result.states[-1], result.last_prenorm)
        if family != "gpt2":  # GPT-2 adds position embeddings to the token embedding
            embedded = arch.embedding(loaded.model)[torch.as_tensor(sample.token_ids)].numpy()
            np.testing.assert_allclose(result.states[0], embedded, rtol=1e-6)


def test_cached_extraction_is_deterministic_and_computed_once(neox_folder, corpus, tmp_path):
    cache = ResultCache(tmp_path)
    loaded = load(resolve(str(neox_folder)), device="cpu")
    stages = []
    first = hidden_states(loaded, corpus, SAMPLING, progress=lambda *a: stages.append(a), cache=cache)
    again = hidden_states(loaded, corpus, SAMPLING, progress=lambda *a: stages.append(a), cache=cache)
    assert first.computed and not again.computed
    assert stages and all(stage == "forward pass" for stage, *_ in stages)
    assert stages[-1][1] == stages[-1][2]  # reported done
    fresh = extract(loaded, token_sample(loaded, corpus, SAMPLING, cache))
    np.testing.assert_array_equal(fresh.states, again.value.states)
    other = hidden_states(loaded, corpus, Sampling(n_tokens=96, window=32, skip=2, per_window=8, seed=1),
                          cache=cache)
    assert other.computed and not np.array_equal(other.value.states, first.value.states)


def test_ctrl_c_mid_extraction_leaves_nothing(neox_folder, corpus, tmp_path):
    cache = ResultCache(tmp_path)
    loaded = load(resolve(str(neox_folder)), device="cpu")

    def interrupt(stage, done, total):
        if done > 0:
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        hidden_states(loaded, corpus, SAMPLING, batch_size=2, progress=interrupt, cache=cache)
    assert hidden_states(loaded, corpus, SAMPLING, batch_size=2, cache=cache).computed


def test_layer_out_of_range_is_named(neox_folder, corpus, tmp_path):
    loaded = load(resolve(str(neox_folder)), device="cpu")
    result = hidden_states(loaded, corpus, SAMPLING, cache=ResultCache(tmp_path)).value
    assert result.layer(-1).shape == (96, 32)
    with pytest.raises(InputError, match="Layer 4 is out of range.*0..3"):
        result.layer(4)


def test_bad_device_and_dtype(neox_folder):
    ref = resolve(str(neox_folder))
    with pytest.raises(InputError, match="dtype 'float8'"):
        load(ref, device="cpu", dtype="float8")
    if not torch.cuda.is_available():
        with pytest.raises(InputError, match="no CUDA GPU"):
            load(ref, device="cuda")


def test_a_gguf_transformers_cannot_read_is_named(tmp_path):
    bad = tmp_path / "broken.gguf"
    bad.write_bytes(b"GGUF" + b"\x03\x00\x00\x00" + b"\x00" * 64)
    with pytest.raises(InputError, match="cannot load the GGUF file"):
        load(resolve(str(bad)), device="cpu")


def test_a_gguf_is_parsed_once_while_it_is_converted_and_gguf_is_left_as_it_was(tmp_path):
    import gguf

    from analysis.models.loading import _gguf_parsed_once

    path = tmp_path / "tiny.gguf"
    writer = gguf.GGUFWriter(path, "llama")
    writer.add_block_count(1)
    writer.add_tensor("token_embd.weight", np.ones((8, 4), dtype=np.float32))
    for write in (writer.write_header_to_file, writer.write_kv_data_to_file, writer.write_tensors_to_file):
        write()
    writer.close()
    reader_class, name_map = gguf.GGUFReader, gguf.get_tensor_name_map
    with _gguf_parsed_once():
        assert gguf.GGUFReader(path) is gguf.GGUFReader(path)
        llama = gguf.MODEL_ARCH.LLAMA
        assert gguf.get_tensor_name_map(llama, 2) is gguf.get_tensor_name_map(llama, 2)
    assert (gguf.GGUFReader, gguf.get_tensor_name_map) == (reader_class, name_map)
    assert isinstance(gguf.GGUFReader(path), reader_class)


def test_two_conversions_at_once_put_back_gguf_s_own_functions():
    import threading

    import gguf

    from analysis.models.loading import _gguf_parsed_once

    originals, inside, second_done = (gguf.GGUFReader, gguf.get_tensor_name_map), threading.Event(), threading.Event()

    def second() -> None:
        inside.wait()
        with _gguf_parsed_once():  # begins while the first one runs
            pass
        second_done.set()

    thread = threading.Thread(target=second)
    thread.start()
    with _gguf_parsed_once():
        inside.set()
        assert not second_done.wait(0.2)  # it waits for the first one
    thread.join(5)
    assert second_done.is_set() and (gguf.GGUFReader, gguf.get_tensor_name_map) == originals


def test_auto_dtype_is_bfloat16_only_where_the_cpu_computes_it(monkeypatch):
    import analysis.models.devices as devices

    cpu = torch.device("cpu")
    monkeypatch.setattr(devices, "cpu_has_native_bf16", lambda: True)
    assert devices.pick_dtype("auto", cpu) == torch.bfloat16
    monkeypatch.setattr(devices, "cpu_has_native_bf16", lambda: False)
    assert devices.pick_dtype("auto", cpu) == torch.float32
    assert devices.pick_dtype("float32", cpu) == torch.float32
