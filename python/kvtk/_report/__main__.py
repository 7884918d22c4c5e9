"""python -m kvtk._report: the `kvtk report` command (the kvtk executable execs this module).

Exit status: 0 the page was written; 2 bad arguments, a trace or configuration the report cannot
be built from, or an output that may not be written; 130 interrupted.
"""
from __future__ import annotations

import argparse
import sys

EPILOG = """\
The page holds: the trace at a glance; hit ratio against capacity (exact LRU, the optimum, the
policy tune chooses on one half shown on the other); the engine's own offload tier at several
sizes with what each costs and saves; the money at the recommended size with every assumption;
the engine flags to paste and the kvtk commands that reproduce every number. docs/report.md.

exit status: 0 written, 2 bad arguments, input or output, 130 interrupted
"""


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="kvtk report", description="One self-contained HTML page "
                                "from a request trace: what a bigger cache or a better\npolicy "
                                "would save, how big each tier should be, the engine flags.",
                                epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--trace", required=True, help="request trace (any format kvtk reads)")
    p.add_argument("-o", "--out", required=True, help="the HTML file to write")
    p.add_argument("--force", action="store_true", help="replace an existing output file")
    p.add_argument("--engine", choices=("vllm", "sglang"), default="vllm",
                   help="whose hit accounting and offload tier (default: vllm)")
    p.add_argument("--gpu", default="h200", help="GPU preset: h100 h200 h800 a800 (default: h200)")
    p.add_argument("--model", default="qwen2.5-7b", help="model preset: deepseek-v3 llama-3-70b "
                   "qwen2.5-7b qwen3-235b-a22b (default: qwen2.5-7b)")
    p.add_argument("--gpus", type=int, default=1, help="GPUs per instance (tensor parallel; "
                   "default: 1)")
    p.add_argument("--gpu-blocks", type=int, help="the engine's KV blocks per instance, as it "
                   "logs them (default: computed from --gpu, --model, --gpus)")
    p.add_argument("--pricing", default="deepseek-v3.2", help="API price table or a .json file "
                   "(default: deepseek-v3.2)")
    p.add_argument("--gpu-hour", type=float, default=2.0, help="USD per GPU-hour (default: 2)")
    p.add_argument("--efficiency", type=float, default=0.5,
                   help="achieved share of peak FLOP/s (default: 0.5)")
    p.add_argument("--dram-usd-per-gb-month", type=float, default=2.5,
                   help="rent of the offload tier's memory (default: 2.5; 0 = already paid for)")
    p.add_argument("--threads", type=int, default=0, help="threads for tune and replay "
                   "(default: one per core)")
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    return p


def main(argv=None) -> int:
    args = parser().parse_args(argv)
    from .write import write_report
    from .build import ReportError, stderr_log

    try:
        write_report(args.trace, args.out, force=args.force, log=None if args.quiet else stderr_log,
                     engine=args.engine, gpu=args.gpu, model=args.model, gpus=args.gpus,
                     gpu_blocks=args.gpu_blocks, pricing=args.pricing, gpu_hour=args.gpu_hour,
                     efficiency=args.efficiency, dram_usd_per_gb_month=args.dram_usd_per_gb_month,
                     threads=args.threads)
    except ReportError as e:
        print(f"kvtk report: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("kvtk report: interrupted; nothing written", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
