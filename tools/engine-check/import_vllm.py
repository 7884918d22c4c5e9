"""Checks `kvtk trace import --format token-ids --engine vllm` against vLLM 0.33.0's own request
block hasher: every request of a token-id log is made a vLLM Request (its LoRARequest and
cache_salt from the log's fields) with kv_cache_utils.get_request_block_hasher, and its
block_hashes, in vLLM's 64-bit form (kv_cache_utils.maybe_convert_block_hash), must equal the
full-block keys kvtk's import wrote, request by request. Per algorithm: sha256 and sha256_cbor
with vLLM's default NONE_HASH seed, xxhash with PYTHONHASHSEED=0 (when the venv has xxhash).

Usage: build/engine-venv/bin/python tools/engine-check/import_vllm.py KVTK LOG [--block-size N]
Exit 1 on any difference."""
import argparse
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")


def vllm_keys(log, algo, block_size, seed):
    from vllm.lora.request import LoRARequest
    from vllm.sampling_params import SamplingParams
    from vllm.utils import hashing as vllm_hashing
    from vllm.v1.core import kv_cache_utils as kcu
    from vllm.v1.request import Request
    if seed is None:
        os.environ.pop("PYTHONHASHSEED", None)
    else:
        os.environ["PYTHONHASHSEED"] = seed
    hash_fn = vllm_hashing.get_hash_fn_by_name(algo)
    kcu.init_none_hash(hash_fn)
    hasher = kcu.get_request_block_hasher(block_size, hash_fn)
    out, lora_ids = [], {}
    with open(log) as f:
        for i, line in enumerate(f):
            rec = json.loads(line)
            lora = None
            if rec.get("lora_name"):
                lid = lora_ids.setdefault(rec["lora_name"], len(lora_ids) + 1)
                lora = LoRARequest(lora_name=rec["lora_name"], lora_int_id=lid,
                                   lora_path=rec["lora_path"])
            req = Request(request_id=str(i), prompt_token_ids=rec["token_ids"],
                          sampling_params=SamplingParams(max_tokens=1), pooling_params=None,
                          lora_request=lora, cache_salt=rec.get("cache_salt"),
                          block_hasher=hasher)
            out.append([kcu.maybe_convert_block_hash(h) for h in req.block_hashes])
    os.environ.pop("PYTHONHASHSEED", None)
    return out


def kvtk_keys(kvtk, log, algo, block_size, seed, work):
    out = os.path.join(work, f"import-{algo}.jsonl")
    cmd = [kvtk, "trace", "import", log, "-o", out, "--to", "kvtk", "--engine", "vllm",
           "--block-tokens", str(block_size), "--hash-algo", algo, "--force"]
    if seed is not None:
        cmd += ["--hash-seed", seed]
    subprocess.run(cmd, check=True, capture_output=True)
    keys = []
    with open(out) as f:
        for line in f:
            rec = json.loads(line)
            if "kvtk_trace" in rec:
                continue
            full = rec["input_length"] // block_size
            keys.append(rec["hash_ids"][:full])
    return keys


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvtk")
    ap.add_argument("log")
    ap.add_argument("--block-size", type=int, default=16)
    a = ap.parse_args()
    work = tempfile.mkdtemp(prefix="kvtk-import-check-")
    bad = 0
    try:
        import xxhash  # noqa: F401  vLLM's xxhash algorithms need it
        algos = (("sha256", None), ("sha256_cbor", None), ("xxhash", "0"))
    except ImportError:
        algos = (("sha256", None), ("sha256_cbor", None))
        print("xxhash is not installed in this venv: xxhash not checked", flush=True)
    for algo, seed in algos:
        want = vllm_keys(a.log, algo, a.block_size, seed)
        got = kvtk_keys(a.kvtk, a.log, algo, a.block_size, seed, work)
        diff = [i for i, (w, g) in enumerate(zip(want, got)) if w != g]
        same = len(want) == len(got) and not diff
        blocks = sum(len(w) for w in want)
        print(("equal " if same else "DIFFER") + f" {algo} seed={seed} block_size={a.block_size}: "
              f"{len(want)} requests, {blocks} blocks" +
              ("" if same else f"; first differing request {diff[0] if diff else 'count'}"), flush=True)
        bad += 0 if same else 1
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
