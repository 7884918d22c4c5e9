#!/usr/bin/env bash
# cuda/validate.sh [OUT_DIR] — the one prepared GPU check (<= 8 minutes on one H100/H200-class GPU).
# Builds the CUDA movement bench from the CUDA toolkit and kvtk's header-only move headers alone
# (no Boost, no -dev packages, no network), runs the GPU self-test, then the full sweep (H2D, D2H
# and bidir — both directions at once on two streams; 16 KiB-16 MiB blocks; 1-4096 blocks;
# memcpy, coalesced, batched (cudaMemcpyBatchAsync, CUDA >= 12.8; reported unavailable and
# skipped otherwise) and kernel mechanisms; every block verified) and writes OUT_DIR/results.json
# (rows + fitted alpha/beta/bandwidth per path and mechanism) plus the device and toolkit
# description. Default OUT_DIR: cuda/results.
# Time: the sweep moves ~3.2 GB per direction per mechanism over its configurations (largest:
# 256 KiB x 4096 and 4 MiB x 256, 1 GiB each way); with 3 reps, 4 mechanisms and 3 paths it is
# dominated by host-side pattern fill/check (~8 bytes touched per byte moved) and pinning, about
# 1-2 minutes on an H200 host. The self-test (<= 256 MiB per transfer, 1 rep) takes seconds.
# The timeouts (60 s + 420 s) bound the whole script to ~8 minutes even if that estimate is off.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-cuda/results}
mkdir -p "$out" build/cuda
nvcc=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
arch=$("$nvcc" --list-gpu-arch 2>/dev/null | grep -q compute_90 && echo "-gencode arch=compute_90,code=sm_90" || echo "")
"$nvcc" -O3 -std=c++17 $arch -gencode arch=compute_80,code=sm_80 -Iinclude cuda/kv_move_bench.cu \
  -o build/cuda/kv_move_bench
{
  date -u +"date: %Y-%m-%dT%H:%M:%SZ"
  nvidia-smi --query-gpu=name,driver_version,memory.total,pcie.link.gen.max,pcie.link.width.max \
    --format=csv,noheader 2>/dev/null || echo "nvidia-smi: not available"
  "$nvcc" --version | tail -1
} > "$out/device.txt"
timeout 60 build/cuda/kv_move_bench --self-test | tee "$out/self_test.txt"
timeout 420 build/cuda/kv_move_bench --out "$out" | tee "$out/table.txt"
