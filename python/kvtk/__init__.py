"""kvtk: KV-cache policy toolkit from Python.

Every command is the C++ library's own ``run()`` (sim/api), reached through the ``kvtk._kvtk``
extension: options go in by the same names as the CLI's options (snake_case), results come back
with the same fields as the CLI's ``--json``. Long commands (replay, mrc, compare) release the
GIL, take an optional ``progress(done, total)`` callable, and stop with KeyboardInterrupt at
their next progress report after Ctrl-C. See docs/python.md.
"""
from __future__ import annotations

import json
import math
import os
import tempfile
from typing import Any, Callable, Iterable, Optional, Union

from . import _kvtk
from ._kvtk import BlockCache, PrefixTree, Trace

__version__: str = _kvtk.__version__

__all__ = [
    "__version__", "BlockCache", "PrefixTree", "Trace", "TraceError", "load_trace", "replay", "mrc", "tune", "compare", "simulate",
    "cost", "sparse", "trace_stats", "trace_gen", "import_trace", "anonymize_trace", "check_engine", "record_events", "results_frame", "ReplayResults", "sweep",
    "read_sweep", "report",
]

Progress = Optional[Callable[[int, int], Any]]
TraceLike = Union[Trace, str, "os.PathLike[str]"]


class TraceError(ValueError):
    """A malformed or unreadable trace: ``path`` and ``line`` (1-based; 0 when not a line)."""

    def __init__(self, message: str, path: str = "", line: int = 0):
        super().__init__(message)
        self.path = path
        self.line = line


def load_trace(path: Union[str, "os.PathLike[str]"], format: str = "auto",
               block_tokens: Optional[int] = None, skip_invalid: bool = False,
               threads: int = 1) -> Trace:
    """Loads a request trace: mooncake, bailian, kvtk or ids JSONL/text, oracle-general, kvtb.

    ``format="auto"`` detects it from the content; ``block_tokens=None`` takes the trace's own
    (kvtb/kvtk header, else 512 Mooncake, 16 Bailian, 64 kvtk, 1 flat). A ``.kvtb`` file is
    mapped, so its numpy views cost no copy. Raises TraceError for a bad trace.
    """
    return _kvtk.load_trace(os.fspath(path), format, block_tokens or 0, skip_invalid, threads)


_defaults: dict[str, dict] = {}


def _options(command: str, given: dict[str, Any]) -> dict[str, Any]:
    """The options JSON of `command`: None means "the default"; a list option accepts one value
    or an iterable; list items and list-of-string capacities may be numbers."""
    if command not in _defaults:
        _defaults[command] = json.loads(_kvtk.default_options(command))
    defaults = _defaults[command]
    out: dict[str, Any] = {}
    for key, value in given.items():
        if value is None:
            continue
        _check_finite(key, value)
        if isinstance(value, os.PathLike):
            value = os.fspath(value)
        default = defaults.get(key)
        if isinstance(default, list) and not isinstance(value, (list, tuple)):
            value = [value] if isinstance(value, (str, int, float)) else list(value)
        if isinstance(default, list) and isinstance(value, (list, tuple)):
            value = [os.fspath(v) if isinstance(v, os.PathLike) else
                     str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v
                     for v in value]
        out[key] = value
    return out


def _check_finite(key: str, value: Any, where: str = "") -> None:
    """A NaN or infinite number, at any depth (lists, dicts such as a simulate config), gets the
    CLI's kind of message naming the option and the place (JSON, which carries the options to
    C++, has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"--{key.replace('_', '-')}{where}: must be a finite number, got {value}")
    if isinstance(value, dict):
        for k, v in value.items():
            _check_finite(key, v, f"{where}.{k}")
    elif isinstance(value, (list, tuple)):
        for i, v in enumerate(value):
            _check_finite(key, v, f"{where}[{i}]")


def _with_trace(trace: Optional[TraceLike], options: dict[str, Any], scratch: str) -> dict[str, Any]:
    """Names the trace in the options; a Trace built from arrays (no file) is saved to a .kvtb
    file in `scratch` first, since every command reads its trace from a file."""
    if trace is None:
        return options
    if isinstance(trace, Trace):
        path = trace.path
        if not path:
            path = os.path.join(scratch, "trace.kvtb")
            trace.save(path, "kvtb")
        options["trace"] = path
        options.setdefault("format", trace.format)
        options.setdefault("block_tokens", trace.block_tokens)
    else:
        options["trace"] = os.fspath(trace)
    return options


def _run(command: str, trace: Optional[TraceLike], given: dict[str, Any],
         progress: Progress = None) -> dict:
    with tempfile.TemporaryDirectory(prefix="kvtk-") as scratch:
        options = _with_trace(trace, _options(command, given), scratch)
        return json.loads(_kvtk.run_command(command, json.dumps(options), progress))


class ReplayResults(list):
    """replay()'s list of result rows (one dict per job), with the rest of the CLI's JSON:
    ``.trace`` (the trace summary), ``.timings`` (None unless asked) and ``.result`` (the whole
    JSON, e.g. for ``cost(from_result=...)``)."""

    def __init__(self, result: dict):
        super().__init__(result["results"])
        self.result = result
        self.trace = result["trace"]
        self.timings = result.get("timings")


def replay(trace: TraceLike, index: Union[str, Iterable[str]] = "radix",
           policy: Union[str, Iterable[str]] = "lru",
           capacity: Union[None, int, str, Iterable[Union[int, str]]] = None,
           partial_block: Optional[str] = None, threads: int = 1, opt: bool = True,
           tiers: Union[None, str, Iterable[str]] = None, pricing: Optional[str] = None,
           progress: Progress = None, **options: Any) -> ReplayResults:
    """``kvtk replay``: every index x policy x capacity (and each tier hierarchy) on the trace.

    capacity: blocks (1000), tokens ("3Mtok") or bytes ("64GiB", with model=...); None = the
    CLI's default grid. policy "all" runs every policy an index knows. Further options by their
    CLI names in snake_case (engine=["vllm", "sglang"] for the engines' own accounting, model, ideal,
    tier_config, inclusion, write_policy, admission,
    calibration, skip_invalid, ...). Returns the CLI's JSON "results" (one dict per job) as a
    list, with the trace summary as ``.trace`` (ReplayResults).
    """
    given = dict(index=index, policy=policy, capacity=capacity, partial_block=partial_block,
                 threads=threads, opt=opt, tiers=tiers, pricing=pricing, **options)
    return ReplayResults(_run("replay", trace, given, progress))


def mrc(trace: TraceLike, capacity: Union[None, int, str, Iterable[Union[int, str]]] = None,
        points: Optional[int] = None, partial_block: Optional[str] = None,
        sample: Optional[float] = None, opt: bool = False, progress: Progress = None,
        **options: Any) -> dict:
    """``kvtk mrc``: the exact LRU miss-ratio curve of the prefix cache (or a sampled one),
    optionally with the offline optimum at each point. Returns the CLI's JSON (trace, curve,
    sample, warnings)."""
    given = dict(capacity=capacity, points=points, partial_block=partial_block, sample=sample,
                 opt=opt, **options)
    return _run("mrc", trace, given, progress)


def tune(trace: TraceLike, capacity: Union[int, str, Iterable[Union[int, str]]],
         holdout: float = 0.5, partial_block: Optional[str] = None, threads: int = 1,
         **options: Any) -> dict:
    """``kvtk tune``: choose the best online policy on the first part of the trace and report it
    on the rest (the holdout) beside radix LRU and the offline optimum. Returns the CLI's JSON:
    ``trace`` (the split) and ``results`` (per capacity: ``chosen``, ``lru``, ``optimum``,
    ``best_in_hindsight``, every candidate's ``tune`` and ``holdout`` figures, and
    ``recommendation`` with the command to paste). Further options: index, policy, model, ...
    Definitions: docs/policy-quality.md."""
    given = dict(capacity=capacity, holdout=holdout, partial_block=partial_block,
                 threads=threads, **options)
    return _run("tune", trace, given)


def compare(trace: TraceLike, policy: Union[str, Iterable[str]] = "all",
            capacity: Union[None, int, str, Iterable[Union[int, str]]] = None,
            progress: Progress = None, **options: Any) -> dict:
    """``kvtk compare``: flat policies side by side (libCacheSim's view: miss ratios)."""
    return _run("compare", trace, dict(policy=policy, capacity=capacity, **options), progress)


def trace_stats(trace: TraceLike, partial_block: Optional[str] = None, **options: Any) -> dict:
    """``kvtk trace stats``: lengths, reuse distances, ideal hit ratios, sessions, arrivals."""
    return _run("trace_stats", trace, dict(partial_block=partial_block, **options))


def cost(**options: Any) -> dict:
    """``kvtk cost``: the bill and saving of a hit ratio (hit_ratio=..., input_tokens=...,
    pricing=..., or from_result=<a replay/mrc/simulate result: a dict or replay()'s list>;
    ``**{"from": path}`` for a result file). Returns the estimate."""
    if isinstance(options.get("from_result"), ReplayResults):
        options["from_result"] = options["from_result"].result
    return _run("cost", None, options)


def trace_gen(output: Union[str, "os.PathLike[str]"], profile: str = "mixed",
              requests: Optional[int] = None, seed: Optional[int] = None,
              rate: Optional[float] = None, to: Optional[str] = None, force: bool = False,
              **options: Any) -> dict:
    """``kvtk trace gen``: a synthetic trace (chat, agent, api or mixed sessions) written to
    `output` (kvtk JSONL, kvtb or mooncake by `to` or the name). Existing files need force=True.
    Returns requests, output, format and warnings."""
    given = dict(output=os.fspath(output), profile=profile, requests=requests, seed=seed,
                 rate=rate, to=to, force=force, **options)
    return _run("trace_gen", None, given)


def import_trace(log: Union[str, "os.PathLike[str]"], output: Union[str, "os.PathLike[str]"],
                 engine: Optional[str] = None, block_tokens: int = 16, force: bool = False,
                 progress: Progress = None, format: str = "token-ids",
                 tokenizer: Optional[Union[str, "os.PathLike[str]"]] = None,
                 chat_template: Optional[Union[str, "os.PathLike[str]"]] = None,
                 model: Optional[str] = None, **options: Any) -> dict:
    """``kvtk trace import``: a request log written to `output` as a kvtk trace whose keys are
    `engine`'s block hashes (vLLM: ``hash_algo``, ``hash_seed`` = its PYTHONHASHSEED; the
    default is the format's engine: SGLang for "sglang-events", else vLLM).

    format="token-ids": a JSONL or CSV log (``log_format``), or a Parquet one (a ``.parquet``
    name or ``log_format="parquet"``; needs pyarrow), one request per line or row:
    ``timestamp``, ``token_ids``, ``output_length``, optional ``session``, ``lora_name`` and
    ``lora_path``, ``cache_salt``, ``mm_hashes``; other names through ``field_*=`` or
    ``preset="vllm"``.

    format="openai-chat": an OpenAI chat-completions JSONL log (``messages``, ``model``, a
    timestamp or the response's ``created``, ``usage.completion_tokens``) tokenized with the
    local Hugging Face tokenizer directory `tokenizer` and its chat template (or the Jinja file
    `chat_template`), as vLLM's OpenAI server does; `model` keeps that model's records only.
    Needs transformers (the ``text`` extra); nothing is downloaded.

    Returns requests, tokens, full_blocks, seconds and the hashing rate (tokens_per_s over
    ``threads``); for Python-read logs also ``log_format`` and ``skipped_other_model``."""
    log = os.fspath(log)
    given = dict(output=os.fspath(output), block_tokens=block_tokens, force=force, **options)
    if engine is not None:
        given["engine"] = engine
    parquet = format == "token-ids" and (options.get("log_format") == "parquet" or (
        options.get("log_format", "auto") == "auto" and log.lower().endswith(".parquet")))
    if format not in ("openai-chat",) and not parquet:
        if tokenizer is not None or chat_template is not None or model is not None:
            raise ValueError("tokenizer, chat_template and model are for format='openai-chat'")
        return _run("trace_import", None, dict(log=log, format=format, **given), progress)
    from . import _logs
    if not os.path.isfile(log):
        raise ValueError(f"cannot open the log '{log}' (not a regular file)")
    # The temporary log is in kvtk's field names: the user's names were read here.
    for key in list(given):
        if key.startswith("field_") or key in ("preset", "log_format"):
            given.pop(key)
    counts: dict = {}
    if parquet:
        if tokenizer is not None or chat_template is not None or model is not None:
            raise ValueError("tokenizer, chat_template and model are for format='openai-chat'")
        rows, kind, names = _logs.parquet_rows(log, options), "row", _logs.user_names(options)
    else:
        if tokenizer is None:
            raise ValueError("format='openai-chat' needs tokenizer= (the local directory of the "
                             "model's Hugging Face tokenizer)")
        rows = _logs.chat_rows(log, os.fspath(tokenizer),
                               os.fspath(chat_template) if chat_template is not None else None,
                               model, options, counts)
        kind, names = "record", {}
    result = _logs._import_rows(
        rows, log, kind,
        lambda temp: _run("trace_import", None, dict(log=temp, log_format="jsonl", **given), progress),
        names)
    result["log_format"] = "parquet" if parquet else "openai-chat"
    result["skipped_other_model"] = counts.get("other_model", 0)
    return result


def anonymize_trace(trace: Union[str, "os.PathLike[str]"], output: Union[str, "os.PathLike[str]"],
                    salt_file: Optional[Union[str, "os.PathLike[str]"]] = None,
                    time_zero: bool = False, time_shift_s: float = 0.0, force: bool = False,
                    progress: Progress = None, **options: Any) -> dict:
    """``kvtk trace anonymize``: `trace` re-keyed through a secret keyed permutation (block keys
    and session ids; tenants become opaque ids) and written to `output`, so that replays of the
    output equal replays of the input. `salt_file`: the secret (16 B to 1 MiB); None draws a
    random salt that is never kept. Returns requests, keys, sessions, tenants, random_salt."""
    given = dict(trace=os.fspath(trace), output=os.fspath(output),
                 salt_file=os.fspath(salt_file) if salt_file is not None else "",
                 time_zero=time_zero, time_shift_s=time_shift_s, force=force, **options)
    return _run("trace_anonymize", None, given, progress)


def check_engine(events: Union[str, "os.PathLike[str]"], trace: TraceLike,
                 gpu_blocks: int, engine: str = "vllm", block_tokens: Optional[int] = None,
                 **options: Any) -> dict:
    """``kvtk check-engine``: the KV events `events` (a ``record_events`` recording) compared
    block by block with what kvtk's model of `engine` ("vllm" or "sglang") does with the same
    requests `trace` (a path or a Trace), the engine having `block_tokens` tokens a block (the
    trace's, else 16) and `gpu_blocks` blocks (vLLM's logged count, its null block
    included; SGLang: max_total_num_tokens / page size). Options: format, hash_algo, hash_seed,
    keys ("derived" | "engine"), report_mode ("incremental" | "full", vLLM). Returns equal,
    first_divergence, the recorded and predicted stream sizes (docs/formats.md "KV-event
    recordings")."""
    given = dict(events=os.fspath(events), gpu_blocks=gpu_blocks, engine=engine,
                 block_tokens=block_tokens, **options)
    return _run("check_engine", trace, given)


def record_events(output: Union[str, "os.PathLike[str]"], endpoint: str,
                  replay_endpoint: Optional[str] = None, topic: str = "", engine: str = "vllm",
                  count: Optional[int] = None, duration_s: Optional[float] = None,
                  idle_s: Optional[float] = None, first_seq: Optional[int] = None,
                  force: bool = False) -> dict:
    """``kvtk trace record``: the KV events an engine publishes at `endpoint` (vLLM, SGLang: ZMQ
    PUB; engine="dynamo": Dynamo's event plane on ZMQ, its RouterEvents) written to `output` until `count` batches, `duration_s` seconds, `idle_s` seconds
    without a batch, or Ctrl-C. Gaps (dropped messages, a slow joiner) are backfilled from
    `replay_endpoint`; `first_seq` (the engines start at 0) makes batches published before the
    recorder joined count as a gap. Needs pyzmq (the ``events`` extra). Returns batches,
    recovered, lost, gaps and why it stopped (docs/formats.md "KV-event recordings")."""
    from . import _record
    return _record.record(os.fspath(output), endpoint, replay_endpoint, topic, engine, count,
                          duration_s, first_seq, force, idle_s)


def sparse(trace: Optional[TraceLike] = None, **options: Any) -> dict:
    """``kvtk sparse``: decode-step selections (recorded in a kvtk JSONL trace, or generated:
    pattern, steps, requests, ...) against a per-request HBM budget (manager, scorer, budget,
    prefetch lists run as a grid)."""
    return _run("sparse", trace, options)


def simulate(trace: TraceLike, config: Union[None, dict, str, "os.PathLike[str]"] = None,
             progress: Progress = None, **overrides: Any) -> dict:
    """``kvtk simulate``: the discrete-event simulation of a serving cluster.

    config: a dict of config keys (docs/simulate.md) or a config file path; overrides: config
    keys given as arguments (``local_cache="20GiB"``), applied last like ``--set``;
    ``timing_table=path`` is ``--timing-table`` (measured iteration times, docs/simulate.md
    "Timing"). Returns the CLI's JSON with ``requests``: per-request outcomes as numpy arrays
    (arrival_s, first_token_s, done_s, hit_blocks, ...); ``requests=False`` leaves them out, so
    memory stays bounded by the requests in flight (``csv=path`` streams them to a file instead,
    ``force=True`` replaces it). progress(ended, total) counts requests that finished or were
    rejected; Ctrl-C stops the simulation at its next report (about every 1/256 of the trace).
    """
    options: dict[str, Any] = {}
    if isinstance(config, dict):
        _check_finite("config", config)
        options["config"] = config
    elif config is not None:
        options["config_file"] = os.fspath(config)
    for key in ("calibration", "timing_table", "pricing", "skip_invalid", "format", "block_tokens",
                "requests", "csv", "force"):
        if key in overrides:
            value = overrides.pop(key)
            options[key] = os.fspath(value) if isinstance(value, os.PathLike) else value
    for k, v in overrides.items():
        _check_finite(k, v)
    options["set"] = [f"{k}={json.dumps(v)}" for k, v in overrides.items()]
    with tempfile.TemporaryDirectory(prefix="kvtk-") as scratch:
        options = _with_trace(trace, options, scratch)
        text, columns = _kvtk.simulate(json.dumps(options), progress)
    out = json.loads(text)
    out["requests"] = dict(columns)
    return out


def results_frame(results: Union[list, dict]):
    """A pandas DataFrame of a list of results (replay's list, an mrc curve, compare's results):
    nested objects become dotted columns. pandas is imported here only (pip install kvtk[frames])."""
    import pandas as pd  # optional dependency

    if isinstance(results, dict):
        for key in ("results", "curve"):
            if key in results:
                results = results[key]
                break
    return pd.json_normalize(results)


def sweep(spec: Union[dict, str, "os.PathLike[str]"], backend: str = "local",
          out: Union[None, str, "os.PathLike[str]"] = None, workers: int = 0,
          address: Optional[str] = None, resume: bool = False, force: bool = False,
          retries: Optional[int] = None, pool: str = "process",
          progress: Union[bool, Callable[[str], Any]] = False):
    """``kvtk sweep``: every cell of a sweep spec (runs x traces x grid points of replay, mrc,
    simulate or cost), on a local pool of worker processes (``backend="local"``, ``workers``
    of them, default one per core; ``pool="thread"`` for threads) or as Ray tasks
    (``backend="ray"``: ``address`` of a running cluster, else a single-node Ray here).

    spec: a .json/.yaml file (paths in it relative to it) or a dict (relative to the current
    directory). out: None keeps the rows in memory and returns them (a list of dicts, spec
    order); a .jsonl or .parquet path writes each cell's rows as it finishes and returns the
    path (read it with read_sweep); an existing file needs resume=True (keep its finished cells)
    or force=True. A cell whose worker dies or raises is retried ``retries`` times (default: the
    spec's, else 2), then gets a ``failed`` row; bad options or a bad trace give an ``error``
    row. progress: True prints one line per cell on stderr, a callable gets each line.
    Raises ValueError for a bad spec or an unusable output. docs/sweeps.md has the details.
    """
    from ._sweep.driver import run_sweep, stderr_log

    log = progress if callable(progress) else stderr_log if progress else None
    summary = run_sweep(spec, backend=backend, out=None if out is None else os.fspath(out),
                        workers=workers, address=address, resume=resume, force=force,
                        retries=retries, pool=pool, log=log)
    return summary.rows if out is None else summary.path


def report(trace: Union[str, "os.PathLike[str]"], out: Union[str, "os.PathLike[str]"],
           engine: str = "vllm", gpu: str = "h200", model: str = "qwen2.5-7b", gpus: int = 1,
           gpu_blocks: Optional[int] = None, pricing: str = "deepseek-v3.2",
           gpu_hour: float = 2.0, efficiency: float = 0.5, dram_usd_per_gb_month: float = 2.5,
           threads: int = 0, force: bool = False, progress: bool = False) -> str:
    """``kvtk report``: one self-contained HTML page from a trace (the trace at a glance, hit
    ratio against capacity with the tuned policy on held-out data, the engine's offload tier at
    several sizes with its money, the recommended size, engine flags, and the kvtk commands that
    reproduce every number). Needs matplotlib (pip install "./python[report]"). An existing
    `out` is replaced only with force=True. progress=True prints each step on stderr. Returns
    the absolute path written; raises ValueError (kvtk._report.ReportError) for input the
    report cannot be built from. docs/report.md."""
    from ._report.build import stderr_log
    from ._report.write import write_report

    return write_report(trace, out, force=force, log=stderr_log if progress else None,
                        engine=engine, gpu=gpu, model=model, gpus=gpus, gpu_blocks=gpu_blocks,
                        pricing=pricing, gpu_hour=gpu_hour, efficiency=efficiency,
                        dram_usd_per_gb_month=dram_usd_per_gb_month, threads=threads)


def read_sweep(path: Union[str, "os.PathLike[str]"]) -> list:
    """A sweep output's rows (.jsonl or .parquet) as a list of dicts, in the file's order (spec
    order once the sweep has ended). ``pandas.DataFrame(rows)`` makes a frame of them; the
    ``result`` column holds each row's JSON as a string (docs/sweeps.md "Output")."""
    from ._sweep.output import read_rows

    return read_rows(os.fspath(path))
