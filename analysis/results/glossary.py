"""Short explanations of the numbers, read from ``docs/methods.md`` ("What the numbers mean, in short"),
so the page, the report and the docs say the same words.

Each entry there reads ``- **Title** (`key`): text`` (continued on lines indented by two spaces); the
keys are ``z``, ``ccr``, ``epsilon``, ``capacity``, ``pc1`` and ``regime``.
"""

from __future__ import annotations

import functools
import re

from analysis.storage.paths import PROJECT_ROOT

METHODS = PROJECT_ROOT / "docs" / "methods.md"
SECTION = "## 5. What the numbers mean, in short"
ENTRY = re.compile(r"^- \*\*(?P<title>.+?)\*\* \(`(?P<key>\w+)`\): (?P<text>.*(?:\n  .*)*)", re.M)


@functools.cache
def glossary() -> dict[str, tuple[str, str]]:
    """``{key: (title, text)}``; empty when the docs are not beside the code (an installed package)."""
    if not METHODS.exists():
        return {}
    document = METHODS.read_text(encoding="utf-8")
    section = document.split(SECTION, 1)[-1].split("\n## ", 1)[0] if SECTION in document else ""
    return {m["key"]: (m["title"], " ".join(m["text"].split())) for m in ENTRY.finditer(section)}


def explain(key: str) -> str | None:
    """The text for ``key``, or None."""
    entry = glossary().get(key)
    return entry[1] if entry else None
