// The `kvtk` executable: subcommand dispatch.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <exception>
#include <new>
#include <string>
#include <string_view>
#include <vector>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli/check_engine.hpp"
#include "cli/common.hpp"
#include "cli/compare.hpp"
#include "cli/cost.hpp"
#include "cli/move.hpp"
#include "cli/mrc.hpp"
#include "cli/replay.hpp"
#include "cli/report_help.hpp"
#include "cli/tune.hpp"
#include "cli/simulate.hpp"
#include "cli/sweep_help.hpp"
#include "cli/sparse.hpp"
#include "cli/trace_stats.hpp"
#include "util/memory_budget.hpp"
#include "util/output_file.hpp"

namespace {

constexpr const char* kUsage =
    "usage: kvtk <command> [options]\n"
    "\n"
    "commands:\n"
    "  replay    replay a request trace through prefix-cache indexes, policies, capacities\n"
    "  mrc       the exact (or sampled) prefix-LRU miss-ratio curve, optionally with the optimum\n"
    "  tune      choose the best online policy on part of a trace, report it on the rest\n"
    "  trace     stats: what a request trace looks like; gen: a synthetic DeepSeek-style trace\n"
    "  simulate  a discrete-event simulation of a serving cluster: hit ratios and latencies\n"
    "  cost      what a hit ratio is worth: API bills, GPU time saved, break-even capacity\n"
    "  sparse    sparse-attention residency: recalls, stalls, dropped mass under an HBM budget\n"
    "  check-engine  compare a recording of an engine's KV events with kvtk's model of it\n"
    "  move      real block movement: measure and calibrate copy paths (host backend)\n"
    "  compare   replay a flat block trace through eviction policies and capacities\n"
    "  sweep     run a grid of replay/mrc/simulate/cost cells locally or on a Ray cluster\n"
    "            (the Python package's kvtk._sweep; docs/sweeps.md)\n"
    "  report    one self-contained HTML page from a trace: hit ratio against capacity, tier\n"
    "            sizes and their money, engine flags (the Python package's; docs/report.md)\n"
    "\n"
    "'kvtk <command> --help' describes a command; 'kvtk --version' prints the version.\n";

// `kvtk sweep`, `kvtk report` and `kvtk trace record` are the Python package's
// (python/kvtk/_sweep, _report, _record.py): sweep cells call the bound library from worker
// processes or Ray tasks and write Parquet through pyarrow; the report draws its plots with
// matplotlib; the recorder subscribes with pyzmq. The executable has none of these. exec keeps the exit code, stdin/stdout and Ctrl-C as they are.
[[noreturn]] void exec_python(const char* command, const char* module, const char* extra,
                              int first_arg, int argc, char** argv) {
  const char* env = std::getenv("KVTK_SWEEP_PYTHON");
  const std::string python = env != nullptr && *env != '\0' ? env : "python3";
  const std::string script =
      std::string("import runpy, sys\n"
                  "try:\n"
                  "    import ") + module + "\n"
      "except ImportError as e:\n"
      "    sys.stderr.write('kvtk " + command + ": the kvtk Python package is not importable by ' + "
      "sys.executable + ' (' + str(e) + '); install it with pip install \"./python[" + extra + "]\" "
      "or set KVTK_SWEEP_PYTHON to a Python that has it\\n')\n"
      "    sys.exit(2)\n"
      "sys.argv[0] = 'kvtk " + command + "'\n"
      "runpy.run_module('" + module + "', run_name='__main__', alter_sys=False)\n";
  std::vector<char*> args;
  args.push_back(const_cast<char*>(python.c_str()));
  args.push_back(const_cast<char*>("-c"));
  args.push_back(const_cast<char*>(script.c_str()));
  for (int i = first_arg; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  ::execvp(python.c_str(), args.data());
  std::fprintf(stderr,
               "kvtk %s: cannot run %s (%s): it needs Python with the kvtk package "
               "(pip install \"./python[%s]\"), or KVTK_SWEEP_PYTHON naming one\n",
               command, python.c_str(), std::strerror(errno), extra);
  std::exit(2);
}

extern "C" char** environ;

// Whether `python` can import `module` (no stdin, its output discarded): false when it cannot.
bool python_imports(const std::string& python, const char* module) {
  posix_spawn_file_actions_t quiet;
  if (posix_spawn_file_actions_init(&quiet) != 0) return false;
  posix_spawn_file_actions_addopen(&quiet, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&quiet, 2, "/dev/null", O_WRONLY, 0);
  const std::string code = std::string("import ") + module;
  char* args[] = {const_cast<char*>(python.c_str()), const_cast<char*>("-c"),
                  const_cast<char*>(code.c_str()), nullptr};
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, python.c_str(), &quiet, nullptr, args, environ);
  posix_spawn_file_actions_destroy(&quiet);
  if (rc != 0) return false;
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return false;
  }
  return WIFEXITED(status) && WEXITSTATUS(status) == 0;
}

// `kvtk sweep --help` and `kvtk report --help` answer without the Python package: the parser's
// help as built in (sim/cli/sweep_help.hpp, report_help.hpp), then what the command itself needs.
// With the package, argparse answers.
bool help_without_python(const char* command, const char* module, const char* built_in,
                         const char* extra, int argc, char** argv) {
  bool help = false;
  for (int i = 2; i < argc; ++i) {
    const std::string_view a = argv[i];
    help = help || a == "-h" || a == "--help";
  }
  if (!help) return false;
  const char* env = std::getenv("KVTK_SWEEP_PYTHON");
  const std::string python = env != nullptr && *env != '\0' ? env : "python3";
  if (python_imports(python, module)) return false;
  std::fputs(built_in, stdout);
  std::fprintf(stderr,
               "\nkvtk %s: note: running it needs the kvtk Python package, which %s "
               "cannot import (or cannot be run): pip install \"./python[%s]\", or set "
               "KVTK_SWEEP_PYTHON to a Python that has it\n",
               command, python.c_str(), extra);
  return true;
}

// `kvtk sweep` / `kvtk report`: the built-in help, else the Python module.
[[noreturn]] void python_command(const char* command, const char* module, const char* built_in,
                                 const char* extra, int argc, char** argv) {
  if (help_without_python(command, module, built_in, extra, argc, argv)) {
    if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
      std::fprintf(stderr, "kvtk %s: cannot write standard output: %s\n", command,
                   std::strerror(errno));
      std::exit(1);
    }
    std::exit(0);
  }
  exec_python(command, module, extra, 2, argc, argv);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string_view cmd = argv[1];
  if (cmd == "--version" || cmd == "version") {
    std::printf("kvtk %s\n", KVTK_VERSION);
    return 0;
  }
  if (cmd == "--help" || cmd == "-h" || cmd == "help") {
    std::fputs(kUsage, stdout);
    return 0;
  }
  if (cmd == "sweep") python_command("sweep", "kvtk._sweep", kvtk::sim::kSweepHelp, "sweep", argc, argv);
  if (cmd == "report") {
    python_command("report", "kvtk._report", kvtk::sim::kReportHelp, "report", argc, argv);
  }
  if (cmd == "trace" && argc > 2 && std::string_view(argv[2]) == "record") {
    exec_python("trace record", "kvtk._record", "events", 3, argc, argv);
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  kvtk::sim::install_signal_cleanup();  // an interrupted write leaves no temporary behind
  try {
    int rc = -1;
    if (cmd == "compare") rc = kvtk::sim::run_compare(rest);
    if (cmd == "replay") rc = kvtk::sim::run_replay(rest);
    if (cmd == "mrc") rc = kvtk::sim::run_mrc(rest);
    if (cmd == "tune") rc = kvtk::sim::run_tune(rest);
    if (cmd == "trace") rc = kvtk::sim::run_trace(rest);
    if (cmd == "simulate") rc = kvtk::sim::run_simulate(rest);
    if (cmd == "cost") rc = kvtk::sim::run_cost(rest);
    if (cmd == "move") rc = kvtk::sim::run_move(rest);
    if (cmd == "sparse") rc = kvtk::sim::run_sparse(rest);
    if (cmd == "check-engine") rc = kvtk::sim::run_check_engine(rest);
    if (rc >= 0) {
      // Tables and JSON printed to stdout: a full disk or a closed pipe is an error too.
      std::cout.flush();
      if (!std::cout || std::fflush(stdout) != 0 || std::ferror(stdout)) {
        std::fprintf(stderr, "kvtk %s: cannot write standard output: %s\n", argv[1],
                     std::strerror(errno));
        return rc == 0 ? 1 : rc;
      }
      return rc;
    }
  } catch (const kvtk::sim::output_refused& e) {  // an output that may not be written
    std::fprintf(stderr, "kvtk %s: %s\n", argv[1], e.what());
    return 2;
  } catch (const kvtk::sim::usage_error& e) {  // a bad command line, wherever it is found
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
