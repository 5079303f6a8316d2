"""What each ``python -m analysis`` subcommand does with its parsed arguments: build the choices,
call the library's door (``analysis.runs.analyses``), print or write the result's JSON."""

from __future__ import annotations

import argparse
import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from analysis.capacity.atlas import SOURCE, published_models
from analysis.capacity.formulas import FORMULAS
from analysis.capacity.packing import fit_formulas, optimized_packing, random_packing
from analysis.data.corpus import Corpus, Sampling, load_corpus
from analysis.data.labelled import labelled_data
from analysis.errors import InputError, require
from analysis.models.refs import list_checkpoints
from analysis.models.train_demo import DemoSettings, train_demo
from analysis.progress import OneBar, TqdmProgress
from analysis.runs import analyses
from analysis.runs.backends import make_backend
from analysis.runs.plan import parse_plan, read_plan
from analysis.runs.series import free_memory
from analysis.runs.settings import Compute, ModelChoice, pga_settings
from analysis.runs.sweep import is_stored, plan_jobs, run_sweep
from analysis.storage.store import ResultStore


def check_writable(path: Path | None, option: str) -> None:
    """InputError before any computation when ``path`` cannot be written (so no result is lost)."""
    if path is None or str(path) == "-":
        return
    existed = path.exists()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a"):
            pass
    except OSError as error:
        raise InputError(f"{option} {str(path)!r} cannot be written ({error.strerror or error}); "
                         "choose another path.") from None
    if not existed:
        path.unlink()


def json_safe(node):
    """``node`` with every NaN or infinite float as None (JSON has no such numbers: an undefined value is null)."""
    if isinstance(node, float):
        return node if math.isfinite(node) else None
    if isinstance(node, dict):
        return {key: json_safe(value) for key, value in node.items()}
    if isinstance(node, list | tuple):
        return [json_safe(value) for value in node]
    return node


def emit_json(payload: dict, out: Path | None) -> None:
    """Write ``payload`` to ``out``, or print it when ``out`` is None or '-' (undefined numbers as null)."""
    text = json.dumps(json_safe(payload), indent=2, allow_nan=False)
    if out is None or str(out) == "-":
        print(text)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text + "\n")


def choice_from(args: argparse.Namespace) -> ModelChoice:
    return ModelChoice(args.model, args.revision, args.allow_pickle, args.trust_remote_code, args.tokenizer)


def compute_from(args: argparse.Namespace) -> Compute:
    return Compute(args.device, args.dtype, getattr(args, "batch_size", Compute.batch_size))


def sampling_from(args: argparse.Namespace) -> Sampling:
    return Sampling(args.n_tokens, args.window, args.skip, args.per_window, args.seed)


def corpus_from(args: argparse.Namespace) -> Corpus:
    return load_corpus(args.corpus, args.jsonl_field, args.max_corpus_mb)


def model_info(args: argparse.Namespace) -> int:
    info = analyses.model_card(choice_from(args))
    if args.json:
        emit_json(info, None)
        return 0
    for key, value in info.items():
        if key == "checkpoints":
            value = f"{len(value)} ({value[0]} .. {value[-1]})" if value else "none"
        print(f"{key:16} {value}")
    return 0


def hidden_states(args: argparse.Namespace) -> int:
    progress = TqdmProgress()
    sampling, corpus = sampling_from(args), corpus_from(args)
    loaded = analyses.open_model(choice_from(args), compute_from(args), progress)
    entry = analyses.model_hidden_states(loaded, corpus, sampling, compute_from(args), progress)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, entry.value.states)
    if args.prenorm_out:
        np.save(args.prenorm_out, entry.value.last_prenorm)
    source = "computed" if entry.computed else f"from cache ({entry.provenance['computed_at']})"
    print(f"wrote {args.out} {entry.value.states.shape} {source}; model {loaded.ref.label}", file=sys.stderr)
    return 0


def pga(args: argparse.Namespace) -> int:
    progress = TqdmProgress()
    options = {"ccrs": args.ccr, "n_null": args.n_null, "seed": args.seed, "max_pairs": args.max_pairs,
               "ccr_fit": args.ccr_fit}
    if args.hidden or args.unembedding:
        require(bool(args.hidden and args.unembedding), "--hidden and --unembedding go together.")
        w_u = _load_npy(args.unembedding, "--unembedding")
        require(w_u.ndim == 2, f"--unembedding must be a [V, d] array; got shape {w_u.shape}.")
        settings = pga_settings(w_u.shape[1], args.k, **options)
        run = analyses.arrays_pga(_load_npy(args.hidden, "--hidden"), w_u, settings, args.layers, args.device,
                                  progress)
    else:
        settings = pga_settings(analyses.model_card(choice_from(args))["d_model"], args.k, **options)
        loaded = analyses.open_model(choice_from(args), compute_from(args), progress)
        run = analyses.model_pga(loaded, corpus_from(args), sampling_from(args), settings, args.layers,
                                 compute_from(args), progress)
    emit_json(run.to_json(), args.json)
    return 0


def _load_npy(path: Path, option: str) -> np.ndarray:
    try:
        return np.load(path, allow_pickle=False)
    except (OSError, ValueError) as error:
        raise InputError(f"{option} {str(path)!r} is not a readable .npy array ({error}).") from None


def capacity(args: argparse.Namespace) -> int:
    if args.d is not None or args.eps is not None:
        require(args.d is not None and args.eps is not None, "--d and --eps go together.")
        payload = analyses.formula_capacity(args.d, args.eps, args.delta).to_json()
    else:
        payload = analyses.model_capacity(choice_from(args), args.matrix, args.bins, args.sample_pairs, args.seed,
                                          args.device, args.delta, TqdmProgress()).to_json()
    if args.json is not None:
        emit_json(payload, args.json)
        return 0
    subject = payload.get("model", f"d = {payload['d']}")
    capacities = payload["capacity"]
    print(f"{subject}: eps = {payload['eps']:.4f}, {payload['class']}, capacity {capacities['status']}")
    if capacities["status"] == "indeterminate":
        print(f"  {payload['class_note']}")
        return 0
    for name in (*FORMULAS, "extrapolated"):
        value = capacities[name]
        shown = value if name == "extrapolated" else "infinite (over 1.8e308)" if value is None else f"{value:.4g}"
        print(f"  {name:12} {shown}")
    return 0


def atlas(args: argparse.Namespace) -> int:
    if args.measure:
        measured = analyses.measure_published(args.measure, args.device)
        if args.json is not None:
            emit_json(measured.to_json(), args.json)
        else:
            print(measured.describe())
        return 0
    rows = [{"name": m.name, "hub_id": m.hub_id, "d_model": m.d_model, "epsilon": m.epsilon, "class": m.model_class,
             "capacity": m.capacity.to_json()["capacity"]} for m in published_models()]
    if args.json is not None:
        emit_json({"source": SOURCE, "models": rows}, args.json)
        return 0
    print(f"{SOURCE} (capacities computed here from d_model and epsilon):")
    for row in rows:
        full = row["capacity"]["full"]
        shown = "indeterminate" if row["capacity"]["status"] == "indeterminate" else f"{full:.3g}"
        print(f"  {row['name']:28} {row['hub_id']:48} d {row['d_model']:6}  eps {row['epsilon']:.5f}  "
              f"{row['class']}  capacity {shown}")
    return 0


def packing(args: argparse.Namespace) -> int:
    progress = TqdmProgress()
    simulate = random_packing if args.method == "random" else optimized_packing
    budget = args.trials if args.method == "random" else args.steps
    cells = [simulate(k, d, budget, args.seed, args.device, progress) for d in args.d for k in args.k]
    payload = {"method": args.method, "seed": args.seed, "cells": [c.to_json() for c in cells]}
    if args.fit:
        payload["fit"] = fit_formulas(cells)
    emit_json(payload, args.json)
    return 0


def checkpoints(args: argparse.Namespace) -> int:
    found = analyses.checkpoint_list(args.model)
    if args.json:
        emit_json({"model": args.model, "checkpoints": found}, None)
        return 0
    for checkpoint in found:
        duplicate = f"  (same weights as {checkpoint['duplicate_of']})" if checkpoint["duplicate_of"] else ""
        print(f"{checkpoint['revision']}  {checkpoint['identity']}{duplicate}")
    if not found:
        print(f"{args.model}: no checkpoints found")
    return 0


def training_sweep(args: argparse.Namespace) -> int:
    series = analyses.checkpoint_series(args.model, None if args.revisions is None else list(args.revisions),
                                        corpus_from(args), sampling_from(args), args.k, args.ccr, args.n_null,
                                        compute_from(args), TqdmProgress())
    emit_json(series.to_json(), args.json)
    return 0


def train_demo_series(args: argparse.Namespace) -> int:
    settings = DemoSettings(widths=args.widths, steps=args.steps, seed=args.seed)
    summary = train_demo(args.out, settings, TqdmProgress())
    payload = {"out": str(args.out), "checkpoint_steps": settings.checkpoint_steps,
               "models": {str(w): {"folder": v["folder"], "final_train_loss": v["train_loss"][-1]}
                          for w, v in summary.items()}}
    if args.json:
        emit_json(payload, None)
        return 0
    for width, model in payload["models"].items():
        print(f"width {width}: {model['folder']} (final training loss {model['final_train_loss']:.3f})")
    return 0


def convergence(args: argparse.Namespace) -> int:
    a, b = ModelChoice.parse(args.model_a), ModelChoice.parse(args.model_b)
    a = ModelChoice(a.name, args.revision_a or a.revision)
    b = ModelChoice(b.name, args.revision_b or b.revision)
    run = analyses.model_convergence(a, b, load_corpus(args.corpus), args.units, args.k, args.n_null, args.seed,
                                     Compute(args.device, args.dtype), TqdmProgress())
    emit_json(run.to_json(), args.json)
    return 0


def probe(args: argparse.Namespace) -> int:
    data = labelled_data(args.data)
    loaded = analyses.open_model(choice_from(args), compute_from(args), TqdmProgress())
    emit_json(analyses.model_probes(loaded, data, args.seed, progress=TqdmProgress()).to_json(), args.json)
    return 0


def report_choices(args: argparse.Namespace) -> list[ModelChoice]:
    """The models to report on: each reference, at its @REVISION, at --revision, or at every checkpoint."""
    choices = []
    for text in args.models:
        parsed = ModelChoice.parse(text, allow_pickle=args.allow_pickle, trust_remote_code=args.trust_remote_code,
                                   tokenizer=args.tokenizer)
        revision = parsed.revision or args.revision
        if revision == "all":
            found = list_checkpoints(parsed.name)
            require(bool(found), f"{parsed.name!r} has no checkpoints, so --revision all names nothing.")
            choices += [replace(parsed, revision=c.revision) for c in found]
        else:
            choices.append(replace(parsed, revision=revision))
    return choices


def report(args: argparse.Namespace) -> int:
    """One report per model, one after another; a failing model is reported and the others go on."""
    sampling, corpus, compute = sampling_from(args), corpus_from(args), compute_from(args)
    choices = report_choices(args)
    args.out_dir.mkdir(parents=True, exist_ok=True)
    written, failed = [], []
    bar = OneBar(len(choices), "reports")
    for choice in choices:
        bar.item(choice.label)
        try:
            loaded = analyses.open_model(choice, compute, bar)
            result = analyses.model_report(loaded, corpus, sampling, compute, bar)
            path = args.out_dir / result.file_name
            path.write_text(result.html(), encoding="utf-8")
            written.append({"model": choice.label, "path": str(path), "identity": result.card["identity"],
                            "verdict": result.verdict_json()})
        except (InputError, OSError, RuntimeError, MemoryError) as error:
            failed.append({"model": choice.label, "error": f"{type(error).__name__}: {error}"})
        finally:
            free_memory()
            bar.advance()
    bar.close()
    if args.json:
        emit_json({"reports": written, "failed": failed}, None)
    else:
        for entry in written:
            print(f"{entry['path']}  ({entry['verdict']['regime']}, peak z {entry['verdict']['peak_z']:.1f})")
    for entry in failed:
        print(f"failed: {entry['model']}: {entry['error']}", file=sys.stderr)
    return 0 if not failed else 1


def plan_from(args: argparse.Namespace) -> dict:
    """The plan file's mapping with the flags given on the command line laid over it."""
    raw = read_plan(args.plan) if args.plan else {}
    if args.model:
        revisions = None if args.revisions is None else "all" if args.revisions == ("all",) else list(args.revisions)
        raw["models"] = [{"model": m, **({"revisions": revisions} if revisions else {})} for m in args.model]
    for key, value in (("corpus", args.corpus), ("n_tokens", args.n_tokens), ("dtype", args.dtype),
                       ("null_subspaces", args.null_subspaces), ("retries", args.retries)):
        if value is not None:
            raw[key] = value
    for key, value in (("seeds", args.seeds), ("k", args.k), ("ccr", args.ccr)):
        if value is not None:
            raw[key] = list(value)
    return raw


def sweep(args: argparse.Namespace) -> int:
    plan = parse_plan(plan_from(args))
    store = ResultStore(args.store)
    backend = make_backend(args.backend, args.address, args.device)
    if args.dry_run:
        jobs = plan_jobs(plan, backend.concrete_dtype(plan.dtype), backend.device)
        waiting = {job.label for job in jobs if not is_stored(job, store)}
        for job in jobs:
            print(f"{'to run' if job.label in waiting else 'stored'}  {job.label}")
        print(f"{len(jobs)} jobs: {len(waiting)} to run, {len(jobs) - len(waiting)} already stored in {store.url}",
              file=sys.stderr)
        for path in store.set_aside:
            print(f"set aside (unreadable or failed its checksum), to run again: {path}", file=sys.stderr)
        return 0
    outcome = run_sweep(plan, backend, store, TqdmProgress())
    print(outcome.summary(), file=sys.stderr)
    if args.json:
        emit_json({"store": outcome.store, "ok": outcome.ok, "jobs": [vars(o) for o in outcome.outcomes]}, args.json)
    return 0 if outcome.ok else 1


COMMANDS = {"atlas": atlas, "model-info": model_info, "hidden-states": hidden_states, "pga": pga, "capacity": capacity,
            "packing": packing, "checkpoints": checkpoints, "training-sweep": training_sweep, "sweep": sweep,
            "train-demo": train_demo_series, "convergence": convergence, "probe": probe, "report": report}
