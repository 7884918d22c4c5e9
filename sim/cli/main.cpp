// The `kvtk` executable: subcommand dispatch.
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include "cli/common.hpp"
#include "cli/compare.hpp"
#include "cli/cost.hpp"
#include "cli/move.hpp"
#include "cli/mrc.hpp"
#include "cli/replay.hpp"
#include "cli/simulate.hpp"
#include "cli/sparse.hpp"
#include "cli/trace_stats.hpp"
#include "util/memory_budget.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kvtk <command> [options]\n"
    "\n"
    "commands:\n"
    "  replay    replay a request trace through prefix-cache indexes, policies, capacities\n"
    "  mrc       the exact (or sampled) prefix-LRU miss-ratio curve, optionally with the optimum\n"
    "  trace     stats: what a request trace looks like; gen: a synthetic DeepSeek-style trace\n"
    "  simulate  a discrete-event simulation of a serving cluster: hit ratios and latencies\n"
    "  cost      what a hit ratio is worth: API bills, GPU time saved, break-even capacity\n"
    "  sparse    sparse-attention residency: recalls, stalls, dropped mass under an HBM budget\n"
    "  move      real block movement: measure and calibrate copy paths (host backend)\n"
    "  compare   replay a flat block trace through eviction policies and capacities\n"
    "\n"
    "'kvtk <command> --help' describes a command.\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (cmd == "compare") return kvtk::sim::run_compare(rest);
    if (cmd == "replay") return kvtk::sim::run_replay(rest);
    if (cmd == "mrc") return kvtk::sim::run_mrc(rest);
    if (cmd == "trace") return kvtk::sim::run_trace(rest);
    if (cmd == "simulate") return kvtk::sim::run_simulate(rest);
    if (cmd == "cost") return kvtk::sim::run_cost(rest);
    if (cmd == "move") return kvtk::sim::run_move(rest);
    if (cmd == "sparse") return kvtk::sim::run_sparse(rest);
  } catch (const kvtk::sim::cli::usage_error& e) {  // a bad command line, wherever it is found
    std::fprintf(stderr, "kvtk %s: %s\n", argv[1], e.what());
    return 2;
  } catch (const kvtk::sim::memory_budget_error& e) {  // options asking for more than there is
    std::fprintf(stderr, "kvtk %s: %s\n", argv[1], e.what());
    return 2;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr,
                 "kvtk %s: out of memory (a capacity, a grid or a trace larger than this "
                 "machine's memory; see --help for the sizes each option allocates)\n",
                 argv[1]);
    return 1;
  } catch (const std::runtime_error& e) {  // bad data, an I/O failure: the message names it
    std::fprintf(stderr, "kvtk %s: %s\n", argv[1], e.what());
    return 1;
  } catch (const std::exception& e) {
    // Every expected failure is a usage_error or a runtime_error (trace_error, write errors)
    // with its own message. Anything else (a logic_error, a JSON library exception) is a bug in
    // kvtk: say so, with a distinct exit code, rather than pass it off as bad input.
    std::fprintf(stderr,
                 "kvtk %s: internal error (a bug in kvtk; please report it with the command "
                 "line): %s\n",
                 argv[1], e.what());
    return 70;
  }
  std::fprintf(stderr, "kvtk: unknown command '%s'\n\n%s", argv[1], kUsage);
  return 2;
}
