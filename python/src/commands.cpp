// python/src/commands.cpp — kvtk._kvtk.run_command and simulate: each command's options arrive as
// JSON (the options struct's own JSON form, api/options_json.hpp: unknown keys and wrong types
// are errors naming the key), run() executes with the GIL released, and the result leaves as the
// CLI's JSON. Long commands report progress through a bridge that also notices Ctrl-C.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>

#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "api/compare.hpp"
#include "api/cost.hpp"
#include "api/mrc.hpp"
#include "api/tune.hpp"
#include "api/replay.hpp"
#include "api/simulate.hpp"
#include "api/sparse.hpp"
#include "api/trace_gen.hpp"
#include "api/check_engine.hpp"
#include "api/trace_anonymize.hpp"
#include "api/trace_import.hpp"
#include "api/trace_stats.hpp"
#include "bindings.hpp"

namespace kvtk::python {
namespace {

using nlohmann::json;
namespace sim = kvtk::sim;

// Thrown through a command's run() to stop it; the Python error it stands for is kept aside.
struct cancelled {};

// The progress callback of a long command: calls the user's `progress(done, total)` (if any) and
// checks for a pending signal (Ctrl-C) on every report, with the GIL held. Either may raise; the
// command then stops at that report and the Python error is raised once run() has unwound.
class progress_bridge {
 public:
  explicit progress_bridge(nb::object progress) : progress_(std::move(progress)) {}

  sim::progress_callback callback() {
    return [this](std::uint64_t done, std::uint64_t total) {
      nb::gil_scoped_acquire gil;
      if (error_) throw cancelled{};
      try {
        if (!progress_.is_none()) progress_(done, total);
        if (PyErr_CheckSignals() != 0) throw nb::python_error();
      } catch (nb::python_error& e) {
        error_.emplace(std::move(e));
        throw cancelled{};
      }
    };
  }

  // Raises the kept Python error (with the GIL held).
  [[noreturn]] void raise() {
    error_->restore();
    throw nb::python_error();
  }

 private:
  nb::object progress_;
  std::optional<nb::python_error> error_;
};

// Parses the options JSON text (a dict serialised by the Python layer).
json options_json(const std::string& text) {
  try {
    return json::parse(text);
  } catch (const json::exception& e) {
    throw nb::value_error((std::string("options: not JSON: ") + e.what()).c_str());
  }
}

// Runs `body` (which returns the result's JSON) without the GIL, translating its errors.
json run_released(progress_bridge& bridge, const std::function<json()>& body) {
  try {
    nb::gil_scoped_release release;
    return body();
  } catch (const cancelled&) {
    bridge.raise();
  } catch (...) {
    raise_python(std::current_exception());
  }
}

// A result's warnings as Python warnings (the GIL held): filterable, unlike lines on stderr.
void warn(const std::string& command, const std::vector<std::string>& warnings) {
  for (const std::string& w : warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ("kvtk " + command + ": " + w).c_str(), 1) != 0) {
      throw nb::python_error();
    }
  }
}

// Runs `command`; the input warnings of commands that return them in JSON-less fields land in
// `warnings` (mrc keeps them in its JSON too, and trace_gen only there, as before).
json dispatch(const std::string& command, const json& j, const sim::progress_callback& progress,
              std::vector<std::string>& warnings) {
  auto with_warnings = [&](auto&& r) {
    warnings = r.warnings;
    return sim::to_json(r);
  };
  if (command == "replay") return with_warnings(sim::run(sim::replay_options_from_json(j), progress));
  if (command == "mrc") {
    const sim::mrc_result r = sim::run(sim::mrc_options_from_json(j), progress);
    json out = sim::to_json(r);
    out["warnings"] = r.warnings;  // kept in the result too, as before
    warnings = r.warnings;
    return out;
  }
  if (command == "compare") return sim::to_json(sim::run(sim::compare_options_from_json(j), progress));
  if (command == "tune") return with_warnings(sim::run(sim::tune_options_from_json(j)));
  if (command == "cost") return sim::to_json(sim::run(sim::cost_options_from_json(j)));
  if (command == "sparse") return sim::to_json(sim::run(sim::sparse_options_from_json(j)));
  if (command == "trace_stats") {
    return with_warnings(sim::run(sim::trace_stats_options_from_json(j)));
  }
  if (command == "trace_gen") {
    const sim::trace_gen_result r = sim::run(sim::trace_gen_options_from_json(j));
    return {{"requests", r.requests}, {"output", r.output}, {"format", r.format},
            {"warnings", r.warnings}};
  }
  if (command == "trace_import") {
    return sim::to_json(sim::run(sim::trace_import_options_from_json(j), progress));
  }
  if (command == "trace_anonymize") {
    return sim::to_json(sim::run(sim::trace_anonymize_options_from_json(j), progress));
  }
  if (command == "check_engine") return sim::to_json(sim::run(sim::check_engine_options_from_json(j)));
  throw nb::value_error(("unknown command '" + command +
                         "' (replay mrc tune compare cost sparse trace_stats trace_gen trace_import "
                         "trace_anonymize check_engine simulate)").c_str());
}

// A numpy array that owns `values` (moved to the heap, freed with the array). bool columns are
// stored as bytes (std::vector<bool> has no contiguous storage) and exposed as numpy bool.
template <class T>
nb::object owned_array(std::vector<T>&& values) {
  using stored = std::conditional_t<std::is_same_v<T, bool>, std::uint8_t, T>;
  auto* heap = new std::vector<stored>(values.begin(), values.end());
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<stored>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T, nb::ndim<1>>(reinterpret_cast<T*>(heap->data()),
                                                         {heap->size()}, owner));
}

// simulate's per-request outcomes as numpy columns (docs/simulate.md "--csv").
nb::dict request_columns(const std::vector<sim::des::request_outcome>& rs) {
  nb::dict cols;
  auto column = [&]<class T>(const char* name, auto field, T) {
    std::vector<T> v;
    v.reserve(rs.size());
    for (const auto& r : rs) v.push_back(static_cast<T>(field(r)));
    cols[name] = owned_array(std::move(v));
  };
  using o = sim::des::request_outcome;
  column("arrival_s", [](const o& r) { return r.arrival; }, 0.0);
  column("prefill_start_s", [](const o& r) { return r.prefill_start; }, 0.0);
  column("first_token_s", [](const o& r) { return r.first_token; }, 0.0);
  column("done_s", [](const o& r) { return r.done; }, 0.0);
  column("mean_tbt_s", [](const o& r) { return r.mean_tbt; }, 0.0);
  column("instance", [](const o& r) { return r.instance; }, std::uint32_t{});
  column("blocks", [](const o& r) { return r.blocks; }, std::uint64_t{});
  column("hit_blocks", [](const o& r) { return r.hit_blocks; }, std::uint64_t{});
  column("dram_blocks", [](const o& r) { return r.dram_blocks; }, std::uint64_t{});
  column("pool_blocks", [](const o& r) { return r.pool_blocks; }, std::uint64_t{});
  column("inflight_miss_blocks", [](const o& r) { return r.inflight_miss_blocks; }, std::uint64_t{});
  column("rejected", [](const o& r) { return r.rejected; }, bool{});
  column("input_tokens", [](const o& r) { return r.input_tokens; }, std::uint64_t{});
  column("hit_tokens", [](const o& r) { return r.hit_tokens; }, std::uint64_t{});
  column("output_tokens", [](const o& r) { return r.output_tokens; }, std::uint64_t{});
  column("recalls", [](const o& r) { return r.recalls; }, std::uint64_t{});
  column("stall_s", [](const o& r) { return r.stall_s; }, 0.0);
  return cols;
}

// Each command's options with their defaults, as JSON (the Python layer learns the keys and
// which of them are lists from it).
std::string default_options(const std::string& command) {
  if (command == "replay") return sim::to_json(sim::replay_options{}).dump();
  if (command == "mrc") return sim::to_json(sim::mrc_options{}).dump();
  if (command == "compare") return sim::to_json(sim::compare_options{}).dump();
  if (command == "tune") return sim::to_json(sim::tune_options{}).dump();
  if (command == "cost") return sim::to_json(sim::cost_options{}).dump();
  if (command == "sparse") return sim::to_json(sim::sparse_options{}).dump();
  if (command == "trace_stats") return sim::to_json(sim::trace_stats_options{}).dump();
  if (command == "simulate") return sim::to_json(sim::simulate_options{}).dump();
  if (command == "trace_gen") return sim::to_json(sim::trace_gen_options{}).dump();
  if (command == "trace_import") return sim::to_json(sim::trace_import_options{}).dump();
  if (command == "trace_anonymize") return sim::to_json(sim::trace_anonymize_options{}).dump();
  if (command == "check_engine") return sim::to_json(sim::check_engine_options{}).dump();
  throw nb::value_error(("unknown command '" + command + "'").c_str());
}

std::string run_command(const std::string& command, const std::string& options, nb::object progress) {
  const json j = options_json(options);
  progress_bridge bridge(std::move(progress));
  const auto cb = bridge.callback();
  std::vector<std::string> warnings;
  const json out = run_released(bridge, [&] { return dispatch(command, j, cb, warnings); });
  warn(command, warnings);
  return out.dump();
}

std::pair<std::string, nb::dict> simulate(const std::string& options, nb::object progress) {
  const json j = options_json(options);
  progress_bridge bridge(std::move(progress));
  const auto cb = bridge.callback();
  sim::simulate_result r;
  const json out = run_released(bridge, [&] {
    r = sim::run(sim::simulate_options_from_json(j), cb);
    return sim::to_json(r);
  });
  warn("simulate", r.warnings);
  return {out.dump(), request_columns(r.requests)};
}

}  // namespace

void bind_commands(nb::module_& m) {
  m.def("run_command", &run_command, nb::arg("command"), nb::arg("options"),
        nb::arg("progress").none() = nb::none(),
        "Runs a kvtk command (replay, mrc, tune, compare, cost, sparse, trace_stats, trace_gen) from its options "
        "as JSON text; returns the result's JSON text (the CLI's --json).");
  m.def("default_options", &default_options, nb::arg("command"),
        "A command's options with their defaults, as JSON text.");
  m.def("simulate", &simulate, nb::arg("options"), nb::arg("progress").none() = nb::none(),
        "Runs kvtk simulate from its options as JSON text; returns (result JSON text, "
        "per-request columns as numpy arrays).");
}

}  // namespace kvtk::python
