"""kvtk policies inside vLLM's CPU offloading tier.

vLLM (``vllm/v1/kv_offload/cpu``) loads the offloading tier's eviction policy by class name and
module path; the interface is marked experimental upstream. ``KvtkCachePolicy`` implements it
with any kvtk policy, the evictable set held in C++ (``kvtk.BlockCache``):

    --kv-transfer-config '{"kv_connector": "OffloadingConnector", "kv_role": "kv_both",
        "kv_connector_extra_config": {"cpu_bytes_to_use": ...,
            "eviction_policy": "KvtkS3FIFO",
            "cache_policy_module_path": "kvtk.integrations.vllm"}}'

``KvtkLRU``, ``KvtkARC``, ``KvtkS3FIFO``, ``KvtkSieve``, ``KvtkClock``, ``KvtkFIFO``,
``KvtkTwoQ``, ``KvtkWTinyLFU`` and ``KvtkLFU`` name the policy; ``make_policy_class(name)`` makes
one for any other kvtk policy name.

Semantics, and how they map onto the kvtk cache:
- a chunk is resident in the kvtk cache from ``insert`` to ``remove``/``evict``/``clear``;
- only unreferenced chunks may be evicted: a chunk whose ``ref_cnt`` is not 0 (a new chunk is
  -1, "not ready", until its store completes; a chunk being loaded is > 0) is pinned in the
  kvtk cache, and ``mark_evictable`` / ``mark_non_evictable`` unpin and pin it;
- ``touch(keys)`` is one access per resident key, tail first, so the head of a request's prefix
  ends most recent (as vLLM's own LRU orders a request); one batched call into C++;
- ``on_request_finished`` touches only the chunks the request reused; chunks it only inserted
  were admitted by ``insert`` and are not accessed again (vLLM's own ARC makes the same
  distinction; its LRU also re-touches inserted chunks, so that a new request's head outlives
  its tail, which kvtk's insertion order does not do);
- ``evict(n, protected)`` evicts exactly n chunks in the kvtk policy's victim order, never a
  protected or pinned one, or nothing (returns None): all or nothing, one call into C++;
- keys (``OffloadKey`` bytes) map to 64-bit kvtk keys by an 8-byte BLAKE2b digest; a collision
  between two live keys raises instead of mixing them up.
"""
from __future__ import annotations

import hashlib
import warnings
from collections.abc import Iterable
from typing import Any, Optional

import numpy as np

from .. import BlockCache

#: vLLM versions whose CachePolicy interface this adapter implements (and was checked against by
#: tools/engine-check/vllm_offload.sh).
SUPPORTED_VLLM = ("0.33.0",)

try:  # vLLM is optional: importing this module without it gives a clear error at use.
    import vllm as _vllm
    from vllm.v1.kv_offload.cpu.policies.base import CachePolicy as _CachePolicy
except ImportError as e:  # pragma: no cover - exercised only without vLLM
    _vllm = None
    _import_error: Optional[ImportError] = e

    class _CachePolicy:  # type: ignore[no-redef]
        def __init__(self, cache_capacity: int) -> None:
            raise ImportError(
                "kvtk.integrations.vllm needs vLLM (supported: "
                + ", ".join(SUPPORTED_VLLM) + f"): {_import_error}")
else:
    _import_error = None
    if getattr(_vllm, "__version__", "?") not in SUPPORTED_VLLM:
        warnings.warn(
            f"kvtk.integrations.vllm: vLLM {_vllm.__version__} is installed; this adapter "
            f"implements the CachePolicy interface of vLLM {', '.join(SUPPORTED_VLLM)} (an "
            "experimental upstream API that changes between releases). Check it with "
            "tools/engine-check/vllm_offload.sh before relying on it.",
            RuntimeWarning, stacklevel=2)


def offload_key_to_u64(key: bytes) -> int:
    """The 64-bit kvtk key of a vLLM OffloadKey (an 8-byte BLAKE2b digest)."""
    return int.from_bytes(hashlib.blake2b(key, digest_size=8).digest(), "little")


class KvtkCachePolicy(_CachePolicy):
    """vLLM CachePolicy backed by a kvtk policy (``kvtk_policy``, a registry name)."""

    kvtk_policy = "lru"

    def __init__(self, cache_capacity: int) -> None:
        super().__init__(cache_capacity)
        self._capacity = int(cache_capacity)
        self._reset()

    def _reset(self) -> None:
        self._cache = BlockCache(self.kvtk_policy, max(self._capacity, 1))
        self._chunks: dict[Any, Any] = {}   # OffloadKey -> ChunkStatus
        self._ids: dict[Any, int] = {}      # OffloadKey -> kvtk key
        self._keys: dict[int, Any] = {}     # kvtk key -> OffloadKey
        self._pinned: set[Any] = set()

    def _id(self, key: Any) -> int:
        i = self._ids.get(key)
        if i is None:
            i = offload_key_to_u64(bytes(key))
            other = self._keys.get(i)
            if other is not None and other != key:
                raise RuntimeError(f"kvtk.integrations.vllm: 64-bit key collision between "
                                   f"{other!r} and {key!r}")
        return i

    def _set_pinned(self, key: Any, pinned: bool) -> None:
        i = self._ids[key]
        if pinned and key not in self._pinned:
            self._cache.pin(i)
            self._pinned.add(key)
        elif not pinned and key in self._pinned:
            self._cache.unpin(i)
            self._pinned.discard(key)

    # --- vLLM's CachePolicy interface ---

    def get(self, key):
        return self._chunks.get(key)

    def insert(self, key, chunk, req_context=None) -> None:
        i = self._id(key)
        if not self._cache.insert(i):
            raise RuntimeError("kvtk.integrations.vllm: the cache is full of chunks in use")
        self._chunks[key] = chunk
        self._ids[key] = i
        self._keys[i] = key
        if chunk.ref_cnt != 0:
            self._set_pinned(key, True)

    def remove(self, key) -> None:
        self._set_pinned(key, False)
        i = self._ids.pop(key)
        self._cache.erase(i)
        del self._keys[i]
        del self._chunks[key]

    def touch(self, keys: Iterable[Any], req_context=None) -> None:
        ids = [self._ids[k] for k in reversed(list(keys)) if k in self._ids]
        if ids:
            self._cache.access(np.fromiter(ids, dtype=np.uint64, count=len(ids)))

    def on_request_finished(self, key_groups, insertion_only_keys, reused_keys,
                            req_context=None) -> None:
        """A finished request accessed the chunks it reused (each once, tail first, so its head
        ends most recent); a chunk it only inserted was admitted by insert() and is not accessed
        a second time (a frequency-aware policy would count it twice otherwise)."""
        keys = [k for group in key_groups for k in group if k in reused_keys]
        self.touch(keys, req_context)

    def evict(self, n: int, protected) -> Optional[list]:
        if n == 0:
            return []
        guard = [self._ids[k] for k in protected if k in self._ids]
        try:
            victims = self._cache.evict(n, np.fromiter(guard, dtype=np.uint64, count=len(guard)))
        except RuntimeError:
            return None
        out = []
        for i in victims.tolist():
            key = self._keys.pop(i)
            del self._ids[key]
            out.append((key, self._chunks.pop(key)))
        return out

    def clear(self) -> None:
        self._reset()

    def mark_evictable(self, key) -> None:
        if key in self._ids:
            self._set_pinned(key, False)

    def mark_non_evictable(self, key) -> None:
        if key in self._ids:
            self._set_pinned(key, True)


def make_policy_class(policy: str) -> type:
    """A KvtkCachePolicy subclass for the kvtk policy named `policy`."""
    BlockCache(policy, 1)  # refuses an unknown or offline name now, with the valid names
    return type(f"Kvtk_{policy}", (KvtkCachePolicy,), {"kvtk_policy": policy})


KvtkLRU = type("KvtkLRU", (KvtkCachePolicy,), {"kvtk_policy": "lru"})
KvtkFIFO = type("KvtkFIFO", (KvtkCachePolicy,), {"kvtk_policy": "fifo"})
KvtkClock = type("KvtkClock", (KvtkCachePolicy,), {"kvtk_policy": "clock"})
KvtkSieve = type("KvtkSieve", (KvtkCachePolicy,), {"kvtk_policy": "sieve"})
KvtkLFU = type("KvtkLFU", (KvtkCachePolicy,), {"kvtk_policy": "lfu"})
KvtkTwoQ = type("KvtkTwoQ", (KvtkCachePolicy,), {"kvtk_policy": "2q"})
KvtkARC = type("KvtkARC", (KvtkCachePolicy,), {"kvtk_policy": "arc"})
KvtkS3FIFO = type("KvtkS3FIFO", (KvtkCachePolicy,), {"kvtk_policy": "s3fifo"})
KvtkWTinyLFU = type("KvtkWTinyLFU", (KvtkCachePolicy,), {"kvtk_policy": "wtinylfu"})
