#!/usr/bin/env bash
# cuda/stage-headers.sh — copies the Boost headers that cuda/kv_move_replay.cpp reaches through
# kvtk's headers (Boost.Intrusive and what it includes: ~70 files, < 1 MB) into
# build/cuda-stage/include, so that cuda/validate.sh can build the device executor on a machine
# without Boost (the GPU machine has the CUDA toolkit but no -dev packages). Run it here, then let
# build/cuda-stage travel with the GPU run (the device tool's `carry`).
set -euo pipefail
cd "$(dirname "$0")/.."
cuda_home=${CUDA_HOME:-/usr/local/cuda}
out=build/cuda-stage/include
rm -rf build/cuda-stage
mkdir -p "$out"
deps=$(${CXX:-g++} -std=c++20 -Iinclude -Isim -I"$cuda_home/include" -M \
         cuda/kv_move_replay.cpp sim/formats/requests.cpp sim/formats/parallel_jsonl.cpp sim/formats/kvtb.cpp \
         sim/formats/requests_load.cpp sim/formats/mooncake_flat.cpp sim/formats/flat_traces.cpp \
         sim/util/output_file.cpp |
       tr ' \\' '\n\n' | grep '/boost/' | sort -u)
n=0
for f in $deps; do
  rel=boost/${f#*/boost/}
  mkdir -p "$out/$(dirname "$rel")"
  cp "$f" "$out/$rel"
  n=$((n + 1))
done
echo "staged $n Boost headers in $out ($(du -sh build/cuda-stage | cut -f1))"
