#!/usr/bin/env bash
# Run classic Vidur (installed in $VIDUR_HOME, README.md) on the Mooncake conversation trace at a load.
#   usage: run_vidur.sh LOAD [extra vidur args...]      LOAD = 1, 2, 4, ... (arrival-rate multiplier)
# Writes: $VIDUR_HOME/traces/mooncake_conv_${LOAD}x.csv     (make_trace.py)
#         $VIDUR_HOME/runs/${LOAD}x/<timestamp>/            (Vidur's output dir: request_metrics.csv,
#                                                          batch_metrics.csv, chrome_trace.json, config.json,
#                                                          vidur_check_extra.json, plots/*.json|csv)
#         $VIDUR_HOME/results/${LOAD}x.json                  (summarise.py)
#         $VIDUR_HOME/results/${LOAD}x_request_metrics.csv, ${LOAD}x_batch_metrics.csv, ${LOAD}x_vidur.log
set -euo pipefail
LOAD=${1:?usage: run_vidur.sh LOAD [extra vidur args]}; shift || true
VIDUR_HOME=${VIDUR_HOME:-/work/vidur}
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
TRACE_JSONL=${TRACE_JSONL:-$HERE/../../traces/mooncake_fast25_conversation_trace.jsonl}
PY=$VIDUR_HOME/venv/bin/python
TAG=${LOAD}x
mkdir -p "$VIDUR_HOME/traces" "$VIDUR_HOME/runs/$TAG" "$VIDUR_HOME/results" "$VIDUR_HOME/cache"
CSV=$VIDUR_HOME/traces/mooncake_conv_${TAG}.csv
"$PY" "$HERE/make_trace.py" "$TRACE_JSONL" "$CSV" --load "$LOAD" --max-tokens 4096

export WANDB_MODE=disabled WANDB_SILENT=true
cd "$VIDUR_HOME/src/vidur"
LOG=$VIDUR_HOME/results/${TAG}_vidur.log
START=$(date +%s.%N)
PYTHONPATH=. "$PY" "$HERE/vidur_main_wrapper.py" \
  --seed 42 \
  --cluster_config_num_replicas 2 \
  --replica_config_model_name Qwen/Qwen-2-7B \
  --replica_config_device a30 \
  --replica_config_network_device a30_single_gpu \
  --replica_config_tensor_parallel_size 1 \
  --replica_config_num_pipeline_stages 1 \
  --replica_config_memory_margin_fraction 0.1 \
  --global_scheduler_config_type round_robin \
  --replica_scheduler_config_type vllm \
  --vllm_scheduler_config_batch_size_cap 48 \
  --vllm_scheduler_config_max_tokens_in_batch 4096 \
  --vllm_scheduler_config_block_size 16 \
  --vllm_scheduler_config_watermark_blocks_fraction 0.01 \
  --request_generator_config_type trace_replay \
  --trace_request_generator_config_trace_file "$CSV" \
  --trace_request_generator_config_max_tokens 4096 \
  --trace_request_generator_config_time_scale_factor 1.0 \
  --execution_time_predictor_config_type random_forrest \
  --random_forrest_execution_time_predictor_config_skip_cpu_overhead_modeling \
  --metrics_config_output_dir "$VIDUR_HOME/runs/$TAG" \
  --metrics_config_cache_dir "$VIDUR_HOME/cache" \
  --metrics_config_write_metrics \
  --metrics_config_store_request_metrics \
  --metrics_config_store_batch_metrics \
  --metrics_config_keep_individual_batch_metrics \
  --metrics_config_store_utilization_metrics \
  --metrics_config_enable_chrome_trace \
  --no-metrics_config_store_plots \
  --no-metrics_config_write_json_trace \
  "$@" 2>&1 | tee "$LOG"
END=$(date +%s.%N)
OUT=$(ls -dt "$VIDUR_HOME/runs/$TAG"/*/ | head -1); OUT=${OUT%/}
WALL=$(python3 -c "print(round($END-$START,2))")
echo "vidur wall time ${WALL}s, output $OUT"
cp "$OUT/request_metrics.csv" "$VIDUR_HOME/results/${TAG}_request_metrics.csv"
[ -f "$OUT/batch_metrics.csv" ] && cp "$OUT/batch_metrics.csv" "$VIDUR_HOME/results/${TAG}_batch_metrics.csv"
"$PY" "$HERE/summarise.py" "$OUT" --trace-csv "$CSV" --wall-s "$WALL" > "$VIDUR_HOME/results/${TAG}.json"
cat "$VIDUR_HOME/results/${TAG}.json"
