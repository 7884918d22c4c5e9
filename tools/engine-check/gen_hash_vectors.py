"""Writes tests/data/engine_hash_vectors.json: block-hash test vectors computed by the engines' own
code, for kvtk/prefix/block_hasher.hpp (checked byte for byte by tests/test_block_hasher.cpp).

Run once, with the engine venv (tools/engine-check/engine_accounting.sh builds it: vLLM 0.33.0
with its dependencies, SGLang 0.5.23 added without them), plus `pip install xxhash==4.1.0` for
vLLM's optional xxhash algorithms:

    HF_HUB_OFFLINE=1 build/engine-venv/bin/python tools/engine-check/gen_hash_vectors.py

CPU only; SGLang builds its native hash extension (hash_binding.cpp, needs g++ and OpenSSL
headers) on first use. Everything hashed goes through the engines' functions:

  vLLM    vllm.v1.request.Request with the block hasher of
          vllm.v1.core.kv_cache_utils.get_request_block_hasher (the engine's own per-request
          hasher: full blocks only, extra keys from LoRA, multimodal items, cache_salt and prompt
          embeds, optional lookahead), the hash functions of vllm.utils.hashing.get_hash_fn_by_name
          and NONE_HASH from kv_cache_utils.init_none_hash; the 64-bit form from
          kv_cache_utils.maybe_convert_block_hash with VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES=1.
  SGLang  sglang.srt.mem_cache.utils: get_hash_str (explicit prior hash), compute_node_hash_values
          (the radix nodes' hash_value, namespaced by extra_key / cache_salt) and
          compute_node_event_hash_values on real radix_cache.TreeNode / RadixKey objects
          (bigram keys included), and hash_str_to_int64.
  xxh3    vllm.utils.hashing._xxhash_digest (xxhash.xxh3_128_digest) on byte strings of every
          XXH3 length class.

NONE_HASH is made deterministic the way vLLM allows: sha256/sha256_cbor derive it from the fixed
seed "vllm-none-hash" when PYTHONHASHSEED is unset; every algorithm uses PYTHONHASHSEED when it
is set (init_none_hash reads os.environ at call time, so the script sets it per vector). xxhash
and xxhash_cbor without PYTHONHASHSEED draw a random seed per process: the script records that
two such NONE_HASHes differ.
"""

from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import os
import platform
import sys
from array import array
from pathlib import Path

# Before vLLM reads it: the integer block-hash form of KV events.
os.environ["VLLM_KV_EVENTS_USE_INT_BLOCK_HASHES"] = "1"
os.environ.pop("PYTHONHASHSEED", None)

import torch  # noqa: E402
from vllm import SamplingParams  # noqa: E402
from vllm.lora.request import LoRARequest  # noqa: E402
from vllm.multimodal.inputs import MultiModalFeatureSpec, PlaceholderRange  # noqa: E402
from vllm.utils import hashing as vllm_hashing  # noqa: E402
from vllm.v1.core import kv_cache_utils as kcu  # noqa: E402
from vllm.v1.request import Request  # noqa: E402

from sglang.srt.mem_cache import utils as sg_utils  # noqa: E402
from sglang.srt.mem_cache.radix_cache import RadixKey, TreeNode  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


# ---------------------------------------------------------------------------------------------
# Token sequences: explicit lists, or {"affine": {n, a, b, mod}} = [(a*i + b) % mod for i < n]
# for the long ones (kept out of the JSON as numbers).
# ---------------------------------------------------------------------------------------------
def affine(n: int, a: int, b: int, mod: int) -> dict:
    return {"affine": {"n": n, "a": a, "b": b, "mod": mod}}


def expand(spec) -> list[int]:
    if isinstance(spec, list):
        return list(spec)
    p = spec["affine"]
    return [(p["a"] * i + p["b"]) % p["mod"] for i in range(p["n"])]


SEQUENCES = {
    # 37 tokens: 9 blocks of 4 + a partial one; 2 blocks of 16 + a partial one.
    "chat_a": [
        151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
        3838, 374, 279, 6722, 315, 9625, 30, 151645, 198, 151644, 77091, 198, 785, 6722,
        315, 9625, 374, 12095, 13, 151645, 198, 151644, 872,
    ],
    # Shares its first 24 tokens (6 blocks of 4, 1 block of 16) with chat_a, then differs.
    "chat_b": [
        151644, 8948, 198, 2610, 525, 264, 10950, 17847, 13, 151645, 198, 151644, 872, 198,
        3838, 374, 279, 6722, 315, 9625, 30, 151645, 198, 151644, 9707, 11, 1246, 525, 498,
        30, 151645, 198, 151644, 77091, 198,
    ],
    # Every pickle int opcode and CBOR head size: K, M, J, LONG1; uint8/16/32/64 heads;
    # ids >= 2^32 also switch SGLang to its wide (0xff, uint64) page encoding.
    "widths": [
        0, 1, 23, 24, 255, 256, 65535, 65536, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**40 + 5,
        2**62, 2**63 - 1, 7, 100000, 151643,
    ],
    "short": [5, 6, 7],
    # Large blocks: vLLM pickles of 20000 five-byte ints span several 64 KiB frames, XXH3 takes
    # its long-input path, CBOR arrays get 2-byte length heads.
    "long": affine(40007, 7919, 13, 152000),
}


# ---------------------------------------------------------------------------------------------
# vLLM
# ---------------------------------------------------------------------------------------------
def vllm_case(name, algo, block_size, tokens, *, seed_env=None, lookahead=0, lora=None,
              cache_salt=None, mm=(), embeds_dim=0):
    """Hash one request with vLLM's own request block hasher; returns the vector."""
    if seed_env is None:
        os.environ.pop("PYTHONHASHSEED", None)
    else:
        os.environ["PYTHONHASHSEED"] = seed_env
    hash_fn = vllm_hashing.get_hash_fn_by_name(algo)
    kcu.init_none_hash(hash_fn)
    none_hash = kcu.NONE_HASH
    seed_used = kcu.get_none_hash_seed()
    os.environ.pop("PYTHONHASHSEED", None)

    toks = expand(SEQUENCES[tokens])
    mm_features = [
        MultiModalFeatureSpec(
            data=None, modality="image", identifier=ident,
            mm_position=PlaceholderRange(offset=off, length=length),
        )
        for ident, off, length in mm
    ] or None
    lora_request = (
        LoRARequest(lora_name=lora[0], lora_int_id=1, lora_path=lora[1]) if lora else None
    )
    prompt_embeds = None
    if embeds_dim:
        g = torch.Generator().manual_seed(1234)
        prompt_embeds = torch.randn(len(toks), embeds_dim, generator=g, dtype=torch.float32)
    hasher = kcu.get_request_block_hasher(block_size, hash_fn, lookahead)
    req = Request(
        request_id=name,
        prompt_token_ids=toks,
        sampling_params=SamplingParams(max_tokens=1),
        pooling_params=None,
        prompt_embeds=prompt_embeds,
        mm_features=mm_features,
        lora_request=lora_request,
        cache_salt=cache_salt,
        block_hasher=hasher,
    )
    hashes = list(req.block_hashes)
    assert list(req.all_token_ids) == toks or prompt_embeds is not None
    extras = {}
    if lora:
        extras["lora"] = {"name": lora[0], "path": lora[1]}
    if cache_salt is not None:
        extras["cache_salt"] = cache_salt
    if mm:
        extras["mm"] = [{"identifier": i, "offset": o, "length": n} for i, o, n in mm]
    if embeds_dim:
        # vLLM's own per-block digests (sha256 of each block's embedding bytes), in block order.
        digests = req._prompt_embeds_per_block_hashes
        extras["prompt_embeds"] = [digests[k].hex() for k in sorted(digests)]
        assert len(digests) == len(hashes)
    return {
        "name": name,
        "algo": algo,
        "block_size": block_size,
        "pythonhashseed": seed_env,
        "none_hash_seed": seed_used,
        "lookahead": lookahead,
        "tokens": tokens,
        "token_ids_used": None if list(req.all_token_ids) == toks else list(req.all_token_ids),
        "extras": extras,
        "none_hash": none_hash.hex(),
        "block_hashes": [h.hex() for h in hashes],
        "int_block_hashes": [kcu.maybe_convert_block_hash(h) for h in hashes],
    }


def vllm_vectors() -> list[dict]:
    out = []
    algos = ["sha256", "sha256_cbor", "xxhash", "xxhash_cbor"]
    lora = ("sql-adapter", "/adapters/sql-lora")
    mm = [("img-aaaa", 2, 5), ("img-bbbb", 9, 2), ("img-cccc", 11, 1), ("img-dddd", 20, 9)]
    for algo in algos:
        crypto = algo.startswith("sha256")
        seeds = [None, "0", "12345"] if crypto else ["0", "12345"]
        for seed in seeds:
            tag = f"{algo}.seed={seed if seed is not None else 'default'}"
            for bs in (4, 16):
                out.append(vllm_case(f"{tag}.chat_a.bs{bs}", algo, bs, "chat_a", seed_env=seed))
            if seed == seeds[0]:
                out.append(vllm_case(f"{tag}.chat_b.bs4", algo, 4, "chat_b", seed_env=seed))
                for bs in (1, 2, 3, 4, 6):
                    out.append(vllm_case(f"{tag}.widths.bs{bs}", algo, bs, "widths",
                                         seed_env=seed))
                out.append(vllm_case(f"{tag}.short.bs4", algo, 4, "short", seed_env=seed))
                out.append(vllm_case(f"{tag}.long.bs20000", algo, 20000, "long", seed_env=seed))
                out.append(vllm_case(f"{tag}.long.bs300", algo, 300, "long", seed_env=seed))
                out.append(vllm_case(f"{tag}.chat_a.bs4.lora", algo, 4, "chat_a",
                                     seed_env=seed, lora=lora))
                out.append(vllm_case(f"{tag}.chat_a.bs4.salt", algo, 4, "chat_a",
                                     seed_env=seed, cache_salt="tenant-42"))
                out.append(vllm_case(f"{tag}.chat_a.bs4.mm", algo, 4, "chat_a",
                                     seed_env=seed, mm=mm))
                out.append(vllm_case(f"{tag}.chat_a.bs16.mm", algo, 16, "chat_a",
                                     seed_env=seed, mm=mm))
                out.append(vllm_case(f"{tag}.chat_a.bs4.all", algo, 4, "chat_a",
                                     seed_env=seed, lora=lora, cache_salt="s\u00e4lt", mm=mm))
                out.append(vllm_case(f"{tag}.chat_a.bs4.embeds", algo, 4, "chat_a",
                                     seed_env=seed, embeds_dim=8))
                out.append(vllm_case(f"{tag}.chat_a.bs4.lookahead1.mm", algo, 4, "chat_a",
                                     seed_env=seed, lookahead=1, mm=mm, cache_salt="t"))
                out.append(vllm_case(f"{tag}.chat_a.bs4.lookahead3.mm", algo, 4, "chat_a",
                                     seed_env=seed, lookahead=3, mm=mm, lora=lora))
    # A cache_salt of 70,000 bytes: pickle writes str payloads >= 64 KiB outside frames.
    big_salt = "salt-" * 14000
    v = vllm_case("sha256.seed=default.chat_a.bs16.bigsalt", "sha256", 16, "chat_a",
                  cache_salt=big_salt)
    v["extras"]["cache_salt"] = {"unit": "salt-", "count": 14000}
    out.append(v)
    # A long PYTHONHASHSEED string (NONE_HASH seed >= 256 bytes: BINUNICODE, CBOR 2-byte head).
    out.append(vllm_case("sha256.seed=long.chat_a.bs16", "sha256", 16, "chat_a",
                         seed_env="9" * 300))
    out.append(vllm_case("sha256_cbor.seed=long.chat_a.bs16", "sha256_cbor", 16, "chat_a",
                         seed_env="9" * 300))
    return out


def xxhash_none_hash_is_random() -> dict:
    os.environ.pop("PYTHONHASHSEED", None)
    seen = []
    for _ in range(2):
        kcu.init_none_hash(vllm_hashing.xxhash)
        seen.append(kcu.NONE_HASH.hex())
    return {"xxhash_none_hash_without_pythonhashseed": seen, "differ": seen[0] != seen[1]}


# ---------------------------------------------------------------------------------------------
# SGLang
# ---------------------------------------------------------------------------------------------
def sg_node(tokens, extra_key, cache_salt, bigram):
    root = TreeNode()
    root.key = RadixKey(token_ids=array("q"), extra_key=None)
    root.hash_value = []
    node = TreeNode()
    node.parent = root
    node.key = RadixKey(array("q", tokens), extra_key, is_bigram=bigram, cache_salt=cache_salt)
    return node


def sglang_case(name, page_size, tokens, *, chain="storage", extra_key=None, cache_salt=None,
                bigram=False, partial=False, prior=None):
    toks = expand(SEQUENCES[tokens])
    if prior is not None or partial:
        # get_hash_str itself: explicit prior hash, and a partial last page when the key is not
        # page aligned.
        assert chain == "storage" and extra_key is None and cache_salt is None
        key = RadixKey(array("q", toks), None, is_bigram=bigram)
        if not partial:
            key = key.page_aligned(page_size)
        hashes = sg_utils.get_hash_str(key, prior, page_size=page_size)
    else:
        node = sg_node(toks, extra_key, cache_salt, bigram)
        # The radix tree inserts page-aligned keys (RadixKey.page_aligned) when page_size > 1.
        node.key = node.key.page_aligned(page_size)
        if chain == "storage":
            hashes = sg_utils.compute_node_hash_values(node, page_size)
        else:
            hashes = sg_utils.compute_node_event_hash_values(node, page_size)
    return {
        "name": name,
        "page_size": page_size,
        "tokens": tokens,
        "chain": chain,
        "bigram": bigram,
        "partial": partial,
        "extra_key": extra_key,
        "cache_salt": cache_salt,
        "prior": prior,
        "page_hashes": list(hashes),
        "int64_keys": [sg_utils.hash_str_to_int64(h) for h in hashes],
    }


def sglang_vectors() -> list[dict]:
    out = []
    for ps in (1, 4, 16):
        out.append(sglang_case(f"chat_a.ps{ps}", ps, "chat_a"))
        out.append(sglang_case(f"chat_b.ps{ps}", ps, "chat_b"))
    out.append(sglang_case("chat_a.ps4.partial", 4, "chat_a", partial=True))
    out.append(sglang_case("chat_a.ps16.partial", 16, "chat_a", partial=True))
    prior = "ab" * 32
    out.append(sglang_case("chat_a.ps4.prior", 4, "chat_a", prior=prior))
    out.append(sglang_case("widths.ps4.partial", 4, "widths", partial=True))
    out.append(sglang_case("widths.ps1", 1, "widths"))
    out.append(sglang_case("long.ps4096", 4096, "long"))
    out.append(sglang_case("chat_a.ps4.bigram", 4, "chat_a", bigram=True))
    out.append(sglang_case("chat_a.ps1.bigram", 1, "chat_a", bigram=True))
    out.append(sglang_case("widths.ps4.bigram.partial", 4, "widths", bigram=True, partial=True))
    for chain in ("storage", "event"):
        out.append(sglang_case(f"chat_a.ps4.{chain}.salt", 4, "chat_a", chain=chain,
                               cache_salt="tenant-42"))
        out.append(sglang_case(f"chat_a.ps4.{chain}.extra", 4, "chat_a", chain=chain,
                               extra_key="lora-0123456789abcdef0123456789abcdef"))
        out.append(sglang_case(f"chat_a.ps4.{chain}.extra_empty", 4, "chat_a", chain=chain,
                               extra_key=""))
        out.append(sglang_case(f"chat_a.ps4.{chain}.both", 4, "chat_a", chain=chain,
                               extra_key="ns", cache_salt="s\u00e4lt"))
        out.append(sglang_case(f"chat_a.ps1.{chain}.plain", 1, "chat_a", chain=chain))
    return out


# ---------------------------------------------------------------------------------------------
def xxh3_vectors() -> list[dict]:
    out = []
    for n in (0, 1, 2, 3, 4, 5, 8, 9, 15, 16, 17, 31, 32, 33, 64, 100, 127, 128, 129, 160, 200,
              239, 240, 241, 255, 256, 500, 1023, 1024, 1025, 1087, 1088, 1089, 2047, 2048,
              2049, 4096, 5000, 100003):
        data = bytes((i * 31 + 7) & 0xFF for i in range(n))
        out.append({"len": n, "digest": vllm_hashing._xxhash_digest(data).hex()})
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=str(ROOT / "tests/data/engine_hash_vectors.json"))
    args = ap.parse_args()

    versions = {
        name: md.version(name) for name in ("vllm", "sglang", "torch", "cbor2", "xxhash")
    }
    versions["python"] = platform.python_version()
    doc = {
        "generator": "tools/engine-check/gen_hash_vectors.py",
        "versions": versions,
        "byte_order": {
            "vllm_int_block_hash": "int.from_bytes(hash, 'big') & (2**64-1): the last 8 bytes",
            "sglang_int64": "hash_str_to_int64: the first 8 bytes, big-endian, signed",
        },
        "sequences": SEQUENCES,
        "vllm": vllm_vectors(),
        "vllm_notes": xxhash_none_hash_is_random(),
        "sglang": sglang_vectors(),
        "xxh3_128": xxh3_vectors(),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1, ensure_ascii=True)
        f.write("\n")
    print(f"wrote {args.out}: {len(doc['vllm'])} vLLM, {len(doc['sglang'])} SGLang, "
          f"{len(doc['xxh3_128'])} XXH3 vectors", file=sys.stderr)


if __name__ == "__main__":
    main()
