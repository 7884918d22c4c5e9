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
# Then the device executor (kv_move_replay.cpp, built with g++ and the CUDA runtime; kvtk's
# headers need Boost.Intrusive's, so run cuda/stage-headers.sh first where Boost is installed and
# carry build/cuda-stage): the conversation trace through HBM 2,500 + pinned DRAM 7,500 blocks of
# 64 KiB, every decision a cudaMemcpyAsync, ~313k block moves, every arrival and every resident
# block verified -> OUT_DIR/replay.json. If it cannot be built (no Boost headers), the script
# says so and the bench results stand.
# The timeouts (60 s + 360 s + 60 s) bound the whole script to ~8 minutes even if the estimates
# are off.
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
timeout 360 build/cuda/kv_move_bench --out "$out" | tee "$out/table.txt"

cuda_home=$(dirname "$(dirname "$nvcc")")
inc="-Iinclude -Isim -I$cuda_home/include"
[ -d build/cuda-stage/include ] && inc="$inc -Ibuild/cuda-stage/include"
if ${CXX:-g++} -O2 -std=c++20 -pthread $inc cuda/kv_move_replay.cpp sim/formats/requests.cpp sim/formats/parallel_jsonl.cpp \
     sim/formats/requests_load.cpp sim/formats/kvtb.cpp sim/formats/mooncake_flat.cpp \
     sim/formats/flat_traces.cpp sim/util/output_file.cpp sim/util/temp_file.cpp \
     -L"$cuda_home/lib64" -lcudart -Wl,-rpath,"$cuda_home/lib64" -o build/cuda/kv_move_replay \
     2> "$out/replay_build.txt"; then
  timeout 60 build/cuda/kv_move_replay --trace traces/mooncake_fast25_conversation_trace.jsonl \
    --tiers hbm:2500:lru,dram:7500:lru --block-bytes 65536 --json "$out/replay.json" |
    tail -8
else
  echo "kv_move_replay: not built (see $out/replay_build.txt; run cuda/stage-headers.sh where"
  echo "Boost is installed and carry build/cuda-stage)"
fi
