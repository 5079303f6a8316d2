"""Shared fixtures: an isolated cache per test session, an offline tokenizer, tiny saved models."""

import os
import shutil
import tempfile
from pathlib import Path

# Isolate the cache before the project is imported; keep the built-in model where CI fetched it.
_SESSION_DIR = Path(tempfile.mkdtemp(prefix="rg-tests-"))
os.environ.setdefault("RG_MODELS_DIR", str(Path(__file__).resolve().parent.parent / "cache" / "models"))
os.environ["RG_CACHE_DIR"] = str(_SESSION_DIR / "cache")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("RG_DEBUG", "1")  # a bug raises its exception (the one-line handler tests unset it)
# The tests compare float32 numbers: run as on a CPU without bfloat16 arithmetic whatever the host has (an AVX512-BF16
# host would pick bfloat16 states); tests/test_cpu_class.py tests both choices.
os.environ["RG_NATIVE_BF16"] = "0"
# The dashboard opens files only under allowed roots: the tests' models and texts live in the temp folder.
os.environ.setdefault("RG_ALLOWED_ROOTS", os.pathsep.join([tempfile.gettempdir(), os.environ["RG_CACHE_DIR"]]))

import pytest  # noqa: E402

from analysis.data.corpus import builtin_corpus  # noqa: E402
from analysis.models.tiny import save_tiny_model, train_tokenizer  # noqa: E402


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer(builtin_corpus().text, vocab_size=512)


@pytest.fixture(scope="session")
def tiny_models(tokenizer, tmp_path_factory):
    """{(family, tied): folder} for GPT-NeoX, Llama and GPT-2, tied and untied."""
    root = tmp_path_factory.mktemp("models")
    return {
        (family, tied): save_tiny_model(root / f"{family}-{'tied' if tied else 'untied'}", family,
                                        tokenizer, tied=tied)
        for family in ("gpt_neox", "llama", "gpt2")
        for tied in (False, True)
    }


STEPS = (0, 10, 20)


@pytest.fixture(scope="session")
def series(tokenizer, tmp_path_factory):
    """A checkpoint folder of three differently seeded tiny GPT-NeoX models."""
    root = tmp_path_factory.mktemp("series") / "neox"
    for step in STEPS:
        save_tiny_model(root / f"checkpoint-{step}", "gpt_neox", tokenizer, seed=step)
    return root


@pytest.fixture(scope="session")
def neox_folder(tiny_models):
    return tiny_models[("gpt_neox", False)]


@pytest.fixture
def allowed(tmp_path, monkeypatch, neox_folder):
    """An instance whose operator allows one folder, holding one model."""
    root = tmp_path / "allowed"
    shutil.copytree(neox_folder, root / "model")
    monkeypatch.setenv("RG_ALLOWED_ROOTS", str(root))
    return root


WHOLE_PROGRAM = {"run_page", "settled", "AppTest", "run_cli", "subprocess"}


def pytest_collection_modifyitems(items):
    """Mark ``integration`` every test that drives a dashboard page (AppTest) or the CLI in a process of its own, by
    the names its body calls: ``make test-fast`` leaves them out."""
    for item in items:
        code = getattr(getattr(item, "function", None), "__code__", None)
        if code is not None and WHOLE_PROGRAM & set(code.co_names):
            item.add_marker(pytest.mark.integration)
