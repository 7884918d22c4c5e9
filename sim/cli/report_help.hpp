// sim/cli/report_help.hpp — `kvtk report --help` when no Python with the kvtk package is at hand:
// the argparse help of python/kvtk/_report/__main__.py, as Python 3.11 prints it at 80 columns.
// Regenerate after changing that parser (tests/cli_report.cmake fails until then):
//   COLUMNS=80 python3 -I -S tests/sweep_help.py python/kvtk/_report/__main__.py
#pragma once

namespace kvtk::sim {

inline constexpr const char* kReportHelp = R"KVTK_HELP(usage: kvtk report [-h] --trace TRACE -o OUT [--force]
                   [--engine {vllm,sglang}] [--gpu GPU] [--model MODEL]
                   [--gpus GPUS] [--gpu-blocks GPU_BLOCKS] [--pricing PRICING]
                   [--gpu-hour GPU_HOUR] [--efficiency EFFICIENCY]
                   [--dram-usd-per-gb-month DRAM_USD_PER_GB_MONTH]
                   [--threads THREADS] [--quiet]

One self-contained HTML page from a request trace: what a bigger cache or a better
policy would save, how big each tier should be, the engine flags.

options:
  -h, --help            show this help message and exit
  --trace TRACE         request trace (any format kvtk reads)
  -o OUT, --out OUT     the HTML file to write
  --force               replace an existing output file
  --engine {vllm,sglang}
                        whose hit accounting and offload tier (default: vllm)
  --gpu GPU             GPU preset: h100 h200 h800 a800 (default: h200)
  --model MODEL         model preset: deepseek-v3 llama-3-70b qwen2.5-7b
                        qwen3-235b-a22b (default: qwen2.5-7b)
  --gpus GPUS           GPUs per instance (tensor parallel; default: 1)
  --gpu-blocks GPU_BLOCKS
                        the engine's KV blocks per instance, as it logs them
                        (default: computed from --gpu, --model, --gpus)
  --pricing PRICING     API price table or a .json file (default:
                        deepseek-v3.2)
  --gpu-hour GPU_HOUR   USD per GPU-hour (default: 2)
  --efficiency EFFICIENCY
                        achieved share of peak FLOP/s (default: 0.5)
  --dram-usd-per-gb-month DRAM_USD_PER_GB_MONTH
                        rent of the offload tier's memory (default: 2.5; 0 =
                        already paid for)
  --threads THREADS     threads for tune and replay (default: one per core)
  --quiet               no progress lines on stderr

The page holds: the trace at a glance; hit ratio against capacity (exact LRU, the optimum, the
policy tune chooses on one half shown on the other); the engine's own offload tier at several
sizes with what each costs and saves; the money at the recommended size with every assumption;
the engine flags to paste and the kvtk commands that reproduce every number. docs/report.md.

exit status: 0 written, 2 bad arguments, input or output, 130 interrupted
)KVTK_HELP";

}  // namespace kvtk::sim
