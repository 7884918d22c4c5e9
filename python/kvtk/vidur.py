"""Vidur profiles -> kvtk timing tables (docs/simulate.md "Timing", "Side by side with Vidur").

Vidur (microsoft/vidur) profiles a model on a GPU as two CSVs: ``mlp.csv`` (the per-layer
token-parallel operators, one row per ``num_tokens``) and ``attention.csv`` (prefill attention
per ``(kv_cache_size, prefill_chunk_size)`` of one request, decode attention per
``(batch_size, kv_cache_size)``, and the KV-cache save per token count). Its simulator predicts a
batch's time, in milliseconds per layer, as

    pre_proj + post_proj + rope + input_layernorm + post_attention_layernorm
      + mlp_up_proj + mlp_down_proj + mlp_act + add      (at the batch's tokens, rounded up to 8)
      + attn_kv_cache_save                               (at the batch's exact tokens)
      + attn_prefill(sum of kv sizes, sqrt(sum of chunk^2)) * (1 + 0.1 if several prefills)
      + attn_decode(decode batch, mean kv size)          * (1 + 0.1 if several decodes)

times the number of layers (vidur/entities/execution_time.py; tensor-parallel all-reduce and
CPU overheads off, as with one GPU and Vidur's default ``skip_cpu_overhead_modeling``). Vidur
fits a random forest to the profile and predicts on a grid; this module interpolates the profile
piecewise-linearly instead (no scikit-learn, no Vidur install), and evaluates the formula at the
points of a kvtk table: a uniform prefill batch of ``b`` requests of ``t`` new tokens on ``c``
cached ones costs the formula with ``b*t`` tokens, kv sum ``b*c`` and chunk ``sqrt(b)*t``; a
decode row of ``b`` requests at context ``c`` the formula with ``b`` tokens. kvtk looks a mixed
batch up at its mean chunk and context, so batches of unequal prompts cost slightly less
attention than in Vidur (sum of squares over square of sums).

``python -m kvtk.vidur ATTENTION_CSV MLP_CSV --layers 28 -o table.csv`` writes the table;
``timing_table_from_vidur(...)`` returns its text. ``--layers`` is the model's layer count (the
profile does not record it).
"""

from __future__ import annotations

import argparse
import bisect
import csv
import math
import os
import sys
from collections import defaultdict
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

__all__ = ["VidurProfile", "timing_table_from_vidur", "main"]

# The operators of mlp.csv that scale with the batch's tokens (ms per layer).
TOKEN_OPS = ("attn_pre_proj", "attn_post_proj", "attn_rope", "input_layernorm",
             "post_attention_layernorm", "mlp_up_proj", "mlp_down_proj", "mlp_act", "add")
PREFILL_BATCHING_OVERHEAD = 0.1  # Vidur's attention_prefill_batching_overhead_fraction default
DECODE_BATCHING_OVERHEAD = 0.1   # attention_decode_batching_overhead_fraction
KV_GRANULARITY = 64              # kv_cache_prediction_granularity: kv sizes rounded up to it


class VidurError(ValueError):
    """A profile that cannot be read: the message names the file, the line and the reason."""


def _interp1(xs: Sequence[float], ys: Sequence[float], x: float) -> float:
    """Piecewise linear through sorted distinct xs; linear extrapolation from the end pairs."""
    if len(xs) == 1:
        return ys[0]
    i = bisect.bisect_left(xs, x)
    i = min(max(i, 1), len(xs) - 1)
    x0, x1, y0, y1 = xs[i - 1], xs[i], ys[i - 1], ys[i]
    return y0 + (y1 - y0) * (x - x0) / (x1 - x0)


class _Nested2:
    """Scattered (a, b) -> y: linear in b within each measured a, then linear across a (kvtk's
    nested rule, as sim/des/timing.cpp; duplicates averaged)."""

    def __init__(self, points: Iterable[Tuple[float, float, float]]):
        acc: Dict[Tuple[float, float], List[float]] = defaultdict(list)
        for a, b, y in points:
            acc[(a, b)].append(y)
        rows: Dict[float, List[Tuple[float, float]]] = defaultdict(list)
        for (a, b), ys in acc.items():
            rows[a].append((b, sum(ys) / len(ys)))
        self.a = sorted(rows)
        self.slices = [sorted(rows[a]) for a in self.a]
        if not self.a:
            raise VidurError("no points")

    def __call__(self, a: float, b: float) -> float:
        def at(k: int) -> float:
            s = self.slices[k]
            return _interp1([p[0] for p in s], [p[1] for p in s], b)

        if len(self.a) == 1:
            return at(0)
        i = min(max(bisect.bisect_left(self.a, a), 1), len(self.a) - 1)
        a0, a1 = self.a[i - 1], self.a[i]
        w = (a - a0) / (a1 - a0)
        return (1 - w) * at(i - 1) + w * at(i)


def _read(path: str) -> List[dict]:
    try:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
    except OSError as e:
        raise VidurError(f"{path}: cannot read: {e.strerror}") from None
    if not rows:
        raise VidurError(f"{path}: no rows")
    return rows


def _number(row: dict, key: str, path: str, line: int) -> float:
    v = row.get(key)
    if v is None or v == "":
        raise VidurError(f"{path}:{line}: no value for {key}")
    try:
        x = float(v)
    except ValueError:
        raise VidurError(f"{path}:{line}: {key} is not a number: {v!r}") from None
    if not math.isfinite(x) or x < 0:
        raise VidurError(f"{path}:{line}: {key} must be a finite number >= 0: {v!r}")
    return x


class VidurProfile:
    """The two CSVs of one model on one device, as lookups in milliseconds per layer."""

    def __init__(self, attention_csv: str, mlp_csv: str, stat: str = "median"):
        if stat not in ("median", "mean", "min", "max"):
            raise VidurError(f"stat must be median, mean, min or max, not {stat!r}")
        col = lambda op: f"time_stats.{op}.{stat}"  # noqa: E731
        mlp = _read(mlp_csv)
        by_tokens: Dict[float, Dict[str, List[float]]] = defaultdict(lambda: defaultdict(list))
        for n, row in enumerate(mlp, start=2):
            t = _number(row, "num_tokens", mlp_csv, n)
            for op in TOKEN_OPS:
                if col(op) in row and row[col(op)] != "":
                    by_tokens[t][op].append(_number(row, col(op), mlp_csv, n))
        self.tokens = sorted(by_tokens)
        self.ops: Dict[str, Tuple[List[float], List[float]]] = {}
        for op in TOKEN_OPS:
            xs = [t for t in self.tokens if by_tokens[t][op]]
            if not xs:
                if op == "post_attention_layernorm":
                    continue  # models without a post-attention norm
                raise VidurError(f"{mlp_csv}: no column {col(op)}")
            self.ops[op] = (xs, [sum(by_tokens[t][op]) / len(by_tokens[t][op]) for t in xs])

        attn = _read(attention_csv)
        save: Dict[float, List[float]] = defaultdict(list)
        prefill, decode = [], []
        for n, row in enumerate(attn, start=2):
            prefill_row = row.get("is_prefill") == "True"
            b = _number(row, "batch_size", attention_csv, n)
            kv = _number(row, "kv_cache_size", attention_csv, n)
            if prefill_row:
                chunk = _number(row, "prefill_chunk_size", attention_csv, n)
                prefill.append((chunk, kv, _number(row, col("attn_prefill"), attention_csv, n)))
                save[b * chunk].append(_number(row, col("attn_kv_cache_save"), attention_csv, n))
            else:
                decode.append((b, kv, _number(row, col("attn_decode"), attention_csv, n)))
                save[b].append(_number(row, col("attn_kv_cache_save"), attention_csv, n))
        if not prefill or not decode:
            raise VidurError(f"{attention_csv}: needs prefill and decode rows (is_prefill True "
                             "and False)")
        self.save_x = sorted(save)
        self.save_y = [sum(save[x]) / len(save[x]) for x in self.save_x]
        self._prefill = _Nested2(prefill)  # (chunk, kv)
        self._decode = _Nested2(decode)    # (batch, kv)
        self.max_chunk = max(p[0] for p in prefill)
        self.max_decode_batch = max(d[0] for d in decode)
        self.max_kv = max(max(p[1] + p[0] for p in prefill), max(d[1] for d in decode))

    def token_ops_ms(self, tokens: float) -> float:
        """The token-parallel operators of one layer for a batch of `tokens` tokens."""
        r = math.ceil(tokens / 8) * 8  # Vidur's _total_num_tokens_rounded
        return sum(max(0.0, _interp1(xs, ys, r)) for xs, ys in self.ops.values())

    def kv_save_ms(self, tokens: float) -> float:
        return max(0.0, _interp1(self.save_x, self.save_y, tokens))

    def prefill_attention_ms(self, kv_sum: float, chunk: float) -> float:
        kv = math.ceil(kv_sum / KV_GRANULARITY) * KV_GRANULARITY
        return max(0.0, self._prefill(chunk, kv))

    def decode_attention_ms(self, batch: float, mean_kv: float) -> float:
        kv = math.ceil(mean_kv / KV_GRANULARITY) * KV_GRANULARITY
        return max(0.0, self._decode(batch, kv))


Lookup = Callable[..., float]


def prefill_batch_ms(p, layers: int, batch: int, tokens: int, context: int) -> float:
    """Vidur's formula for `batch` prefills of `tokens` new tokens on `context` cached ones."""
    attn = p.prefill_attention_ms(batch * context, math.sqrt(batch) * tokens)
    if batch > 1:
        attn *= 1 + PREFILL_BATCHING_OVERHEAD
    return layers * (p.token_ops_ms(batch * tokens) + p.kv_save_ms(batch * tokens) + attn)


def decode_batch_ms(p, layers: int, batch: int, context: int) -> float:
    """Vidur's formula for a decode step of `batch` requests at mean context `context`."""
    attn = p.decode_attention_ms(batch, context)
    if batch > 1:
        attn *= 1 + DECODE_BATCHING_OVERHEAD
    return layers * (p.token_ops_ms(batch) + p.kv_save_ms(batch) + attn)


def _pow2_upto(n: int, extra: Sequence[int] = ()) -> List[int]:
    out, b = [], 1
    while b <= n:
        out.append(b)
        b *= 2
    return sorted(set(out + [x for x in extra if 1 <= x <= n]))


def timing_table_from_vidur(attention_csv: str, mlp_csv: str, layers: int,
                            max_tokens_in_batch: int = 4096, max_batch: int = 0,
                            max_model_len: int = 0, stat: str = "median",
                            profile: Optional[VidurProfile] = None) -> str:
    """The kvtk timing table (CSV text) of a Vidur profile: prefill rows for batches of 1 to
    `max_batch` (default: the profile's largest decode batch) requests of up to
    `max_tokens_in_batch` tokens in all, at contexts up to `max_model_len` (default: the
    profile's); decode rows for every batch up to `max_batch` at the profile's kv sizes."""
    if layers < 1:
        raise VidurError("layers must be >= 1 (the model's layer count)")
    if max_tokens_in_batch < 1:
        raise VidurError("max_tokens_in_batch must be >= 1")
    p = profile or VidurProfile(attention_csv, mlp_csv, stat)
    max_batch = int(max_batch or p.max_decode_batch)
    max_len = int(max_model_len or p.max_kv)
    lines = ["# kvtk timing table from a Vidur profile (python -m kvtk.vidur): "
             f"{os.path.basename(attention_csv)}, {os.path.basename(mlp_csv)}, {layers} layers, "
             f"stat {stat}",
             "kind,batch,tokens_per_request,context_tokens,ms"]
    chunks = sorted({16, 32, 64, 128, 256, 512, 1024, 1536, 2048, 3072, 4096,
                     max_tokens_in_batch})
    contexts = sorted({0, 256, 512, 1024, 2048, 3072, max_len // 2, max_len})
    for b in _pow2_upto(max_batch, [max_batch]):
        for t in chunks:
            if b * t > max_tokens_in_batch or t > max_len:
                continue
            for c in contexts:
                if c + t > max_len:
                    continue
                lines.append(f"prefill,{b},{t},{c},{prefill_batch_ms(p, layers, b, t, c):.6f}")
    for b in range(1, max_batch + 1):
        for c in sorted({64, 128, 256, 512, 1024, 1536, 2048, 3072, max_len}):
            if c > max_len:
                continue
            lines.append(f"decode,{b},1,{c},{decode_batch_ms(p, layers, b, c):.6f}")
    return "\n".join(lines) + "\n"


def main(argv: Optional[Sequence[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m kvtk.vidur", description=__doc__.split("\n")[0])
    ap.add_argument("attention_csv")
    ap.add_argument("mlp_csv")
    ap.add_argument("--layers", type=int, required=True, help="the model's layer count")
    ap.add_argument("--max-tokens-in-batch", type=int, default=4096)
    ap.add_argument("--max-batch", type=int, default=0, help="default: the profile's largest")
    ap.add_argument("--max-model-len", type=int, default=0, help="default: the profile's")
    ap.add_argument("--stat", default="median", choices=["median", "mean", "min", "max"])
    ap.add_argument("-o", "--output", default="-", help="file, or - for stdout")
    ap.add_argument("--force", action="store_true", help="replace an existing output file")
    a = ap.parse_args(argv)
    try:
        text = timing_table_from_vidur(a.attention_csv, a.mlp_csv, a.layers,
                                       a.max_tokens_in_batch, a.max_batch, a.max_model_len,
                                       a.stat)
    except VidurError as e:
        print(f"kvtk.vidur: {e}", file=sys.stderr)
        return 2
    if a.output == "-":
        sys.stdout.write(text)
        return 0
    if os.path.exists(a.output) and not a.force:
        print(f"kvtk.vidur: {a.output} exists (use --force to replace it)", file=sys.stderr)
        return 2
    for src in (a.attention_csv, a.mlp_csv):
        if os.path.exists(a.output) and os.path.samefile(src, a.output):
            print(f"kvtk.vidur: {a.output} is an input", file=sys.stderr)
            return 2
    tmp = f"{a.output}.tmp{os.getpid()}"
    try:
        with open(tmp, "x") as f:
            f.write(text)
        os.replace(tmp, a.output)
    except OSError as e:
        if os.path.exists(tmp):
            os.unlink(tmp)
        print(f"kvtk.vidur: cannot write {a.output}: {e.strerror}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
