"""What each ``python -m analysis`` subcommand does, given its parsed arguments."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from analysis.progress import TqdmProgress


def emit_json(payload: dict, out: Path | None) -> None:
    """Write ``payload`` to ``out``, or print it when ``out`` is None or '-'."""
    text = json.dumps(payload, indent=2, allow_nan=False)
    if out is None or str(out) == "-":
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def resolve_model(args: argparse.Namespace):
    """The ModelRef the arguments name."""
    from analysis.refs import resolve

    return resolve(args.model, args.revision, allow_pickle=args.allow_pickle)


def load_model(args: argparse.Namespace, progress=None):
    """Resolve and load the model the arguments name."""
    from analysis.loading import load

    return load(resolve_model(args), args.device, args.dtype, args.trust_remote_code, progress)


def sampling_from(args: argparse.Namespace):
    """The Sampling the arguments describe."""
    from analysis.corpus import Sampling

    return Sampling(args.n_tokens, args.window, args.skip, args.per_window, args.seed)


def corpus_from(args: argparse.Namespace):
    """The Corpus the arguments name."""
    from analysis.corpus import load_corpus

    return load_corpus(args.corpus, args.jsonl_field, args.max_corpus_mb)


def model_info(args: argparse.Namespace) -> int:
    from analysis.model_info import describe

    info = describe(resolve_model(args), args.trust_remote_code)
    if args.json:
        emit_json(info, None)
    else:
        for key, value in info.items():
            if key == "checkpoints":
                value = f"{len(value)} ({value[0]} .. {value[-1]})" if value else "none"
            print(f"{key:16} {value}")
    return 0


def hidden_states(args: argparse.Namespace) -> int:
    from analysis.hidden import hidden_states as cached_hidden_states

    progress = TqdmProgress()
    sampling, corpus = sampling_from(args), corpus_from(args)
    loaded = load_model(args, progress)
    entry = cached_hidden_states(loaded, corpus, sampling, args.batch_size, progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, entry.value.states)
    if args.prenorm_out:
        np.save(args.prenorm_out, entry.value.last_prenorm)
    source = "computed" if entry.computed else f"from cache ({entry.provenance['computed_at']})"
    print(f"wrote {args.out} {entry.value.states.shape} {source}; model {loaded.ref.label}",
          file=sys.stderr)
    return 0


COMMANDS = {"model-info": model_info, "hidden-states": hidden_states}
