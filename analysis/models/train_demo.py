"""An offline training series: small GPT-NeoX models of several widths trained from scratch on the
built-in corpus, checkpoints saved at log-spaced steps in the HF Trainer layout (``checkpoint-<step>/``).

It lets the across-training views run on a machine with no Hub. What it shows: the whole pipeline on
real checkpoints, and how z, the PC1 angle and the loss move as a model trains. What it cannot show:
the paper's scale effects (Pythia 70M-6.9B trained on 300B tokens); models this small, trained for
minutes on ~110k tokens, say nothing about whether 1B-parameter models keep their readout alignment.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from analysis.data.corpus import builtin_corpus, tokenize
from analysis.models.tiny import tiny_config, train_tokenizer
from analysis.progress import Progress, report


@dataclass(frozen=True)
class DemoSettings:
    """Sizes and schedule of the demo series (defaults: about a minute per width on 2 CPU cores)."""

    widths: tuple[int, ...] = (64, 128)
    n_layers: int = 4
    vocab_size: int = 512
    context: int = 64
    batch_size: int = 16
    steps: int = 512
    learning_rate: float = 3e-3
    seed: int = 0

    @property
    def checkpoint_steps(self) -> list[int]:
        """0, 1, 2, 4, ... up to ``steps`` (log-spaced, as Pythia's early schedule)."""
        return sorted({0, *(2**i for i in range(int(np.log2(self.steps)) + 1)), self.steps})


PARTIAL = "PARTIAL.json"  # in a width's folder while its training has not finished


def partial(folder: Path) -> dict | None:
    """``{"last_checkpoint", "steps"}`` when ``folder``'s training was started and never finished (stopped, or a
    closed tab), else None."""
    marker = Path(folder) / PARTIAL
    try:
        found = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else {"last_checkpoint": None, "steps": None}


def _left(started: float, steps_done: int, steps_left: int) -> str:
    """The time left for ``steps_left`` steps, measured on this machine from the ``steps_done`` since ``started``."""
    if steps_done < 8:
        return "measuring the time left"
    seconds = (time.perf_counter() - started) / steps_done * steps_left
    return f"about {seconds / 60:.1f} min left" if seconds >= 90 else f"about {seconds:.0f} s left"


def train_demo(out_dir: Path, settings: DemoSettings = DemoSettings(), progress: Progress | None = None) -> dict:
    """Train one model per width; returns ``{width: {"folder": path, "train_loss": [...]}}``. While a width trains,
    its folder holds :data:`PARTIAL` with the last checkpoint saved; the file goes once the width is done, so an
    interrupted series is marked as partial."""
    from transformers import AutoModelForCausalLM

    out_dir = Path(out_dir)
    corpus = builtin_corpus()
    tokenizer = train_tokenizer(corpus.text, settings.vocab_size)
    ids = torch.as_tensor(tokenize(tokenizer, corpus))
    n_windows = len(ids) // settings.context
    windows = ids[: n_windows * settings.context].reshape(n_windows, settings.context)
    summary = {}
    for width in settings.widths:
        torch.manual_seed(settings.seed)  # transformers initialises weights from the global generator
        config = tiny_config("gpt_neox", len(tokenizer), d_model=width, n_layers=settings.n_layers)
        model = AutoModelForCausalLM.from_config(config)
        optimiser = torch.optim.AdamW(model.parameters(), lr=settings.learning_rate, weight_decay=0.01)
        generator = torch.Generator().manual_seed(settings.seed)
        folder = out_dir / f"neox-d{width}"
        folder.mkdir(parents=True, exist_ok=True)
        losses, save_at, started = [], set(settings.checkpoint_steps), time.perf_counter()
        total = settings.steps * len(settings.widths)
        for step in range(settings.steps + 1):
            if step in save_at:
                model.save_pretrained(folder / f"checkpoint-{step}")
                tokenizer.save_pretrained(folder / f"checkpoint-{step}")
                (folder / PARTIAL).write_text(json.dumps({"last_checkpoint": step, "steps": settings.steps}))
            if step == settings.steps:
                break
            left = total - settings.steps * settings.widths.index(width) - step  # steps of this and later widths
            report(progress, f"train width {width} ({_left(started, step, left)})", step, settings.steps)
            batch = windows[torch.randint(0, n_windows, (settings.batch_size,), generator=generator)]
            loss = model(batch, labels=batch).loss
            optimiser.zero_grad(set_to_none=True)
            loss.backward()
            optimiser.step()
            losses.append(float(loss.detach()))
        report(progress, f"train width {width}", settings.steps, settings.steps)
        (folder / PARTIAL).unlink()
        summary[width] = {"folder": str(folder), "train_loss": losses}
    return summary
