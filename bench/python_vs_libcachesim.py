#!/usr/bin/env python3
# Usage: python bench/python_vs_libcachesim.py libcachesim   (in a venv with libcachesim==0.3.5)
#        python bench/python_vs_libcachesim.py kvtk          (in build/nbvenv after scripts/python)
# Side by side: libcachesim's Python LRU process_trace vs kvtk.BlockCache.access on the same
# 10^7 keys (Zipf 1.1 over 10^6 objects, seed 1), 10,000-object cache, unit sizes. Run twice,
# once per venv (libcachesim and kvtk live in different venvs), on the same key file.
import sys, time, numpy as np
path = "/tmp/zipf_1e7.oracleGeneral"
rng = np.random.default_rng(1)
keys = (rng.zipf(1.1, 10**7) % 10**6).astype(np.uint64)
rec = np.zeros(len(keys), dtype=[("t", "<u4"), ("id", "<u8"), ("size", "<u4"), ("next", "<i8")])
rec["t"] = np.arange(len(keys)) // 1000
rec["id"] = keys
rec["size"] = 1
rec["next"] = -1
rec.tofile(path)
if sys.argv[1] == "libcachesim":
    import libcachesim as l
    for i in range(3):
        reader = l.TraceReader(path, l.TraceType.ORACLE_GENERAL_TRACE)
        c = l.LRU(10000)
        t0 = time.perf_counter(); mr = c.process_trace(reader); dt = time.perf_counter() - t0
        print(f"libcachesim LRU process_trace: {dt:.3f} s, {len(keys)/dt/1e6:.1f} M req/s, miss ratio {mr[0]:.4f}")
else:
    import kvtk
    for i in range(3):
        c = kvtk.BlockCache("lru", 10000)
        t0 = time.perf_counter(); h = c.access(keys); dt = time.perf_counter() - t0
        print(f"kvtk BlockCache('lru').access: {dt:.3f} s, {len(keys)/dt/1e6:.1f} M keys/s, miss ratio {1-h.mean():.4f}")
    for i in range(2):
        t0 = time.perf_counter(); r = kvtk.replay(path, index="flat", policy="lru", capacity=10000, opt=False); dt = time.perf_counter() - t0
        print(f"kvtk.replay flat lru (file): {dt:.3f} s, miss ratio {1-r[0]['block_hit_ratio']:.4f}")
