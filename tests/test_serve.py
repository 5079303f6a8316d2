"""`python -m dashboard` readies the built-in model before it listens, once, and starts anyway when it cannot."""

from pathlib import Path

import pytest

from analysis.errors import InputError
from dashboard import __main__ as serve


@pytest.fixture
def builtin(tmp_path, monkeypatch):
    """The built-in model's GGUF at hand (fetched) in ``tmp_path``; ``converted`` lists each conversion made."""
    gguf, converted = tmp_path / "model.gguf", []
    gguf.write_bytes(b"GGUF")
    folder = tmp_path / "converted"

    def convert(ref, progress):
        converted.append(ref)
        folder.mkdir()
        (folder / "config.json").write_text("{}")
        return folder

    monkeypatch.setattr(serve, "builtin_gguf_path", lambda: gguf)
    monkeypatch.setattr(serve, "resolve", lambda name: f"ref of {name}")
    monkeypatch.setattr(serve, "converted_gguf", lambda ref: folder)
    monkeypatch.setattr(serve, "gguf_as_safetensors", convert)
    return converted


def test_the_first_start_converts_the_builtin_model_and_later_starts_do_not(builtin, capsys):
    serve.prepare_builtin()
    assert builtin == [f"ref of {serve.BUILTIN_NAME}"]
    assert "De-quantising the built-in model" in capsys.readouterr().err
    serve.prepare_builtin()
    assert len(builtin) == 1 and capsys.readouterr().err == ""


def test_a_model_that_cannot_be_fetched_is_said_and_the_server_starts(builtin, monkeypatch, capsys):
    def offline(name):
        raise InputError("Could not fetch the built-in model")

    monkeypatch.setattr(serve, "builtin_gguf_path", lambda: Path("/nonexistent/model.gguf"))
    monkeypatch.setattr(serve, "resolve", offline)
    serve.prepare_builtin()  # does not raise
    err = capsys.readouterr().err
    assert "Fetching the built-in model" in err and "not ready (Could not fetch the built-in model)" in err
    assert builtin == []
