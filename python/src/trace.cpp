// python/src/trace.cpp — kvtk._kvtk.Trace: a loaded request trace (the same loader as the CLI:
// a .kvtb file is mapped, any other format read into memory) with numpy views of its columns.
// The views share the trace's memory (zero-copy; for .kvtb, the mapped file) and keep the Trace
// alive; they are read-only. Columns a trace does not have are empty arrays.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "cli/common.hpp"
#include "formats/requests.hpp"

namespace kvtk::python {
namespace {

namespace sim = kvtk::sim;

struct trace {
  std::string path, format;
  std::uint32_t block_tokens = 0;
  std::uint64_t skipped_lines = 0;
  sim::loaded_trace loaded;
  std::vector<std::uint64_t> unit_offsets, unit_inputs;  // flat traces: one block per request
};

// A read-only numpy view of `values`, kept alive by the Trace that owns them.
template <class T>
nb::ndarray<nb::numpy, const T, nb::ndim<1>> view(const trace& t, std::span<const T> values) {
  return {values.data(), {values.size()}, nb::find(&t)};
}

trace load_trace(std::string path, std::string format, std::uint32_t block_tokens,
                 bool skip_invalid, unsigned threads) {
  trace t;
  try {
    nb::gil_scoped_release release;
    sim::cli::check_request_format(format);
    sim::read_report report;
    t.loaded = sim::cli::load_trace_for("load_trace", path, format, block_tokens, skip_invalid,
                                        report, false, threads == 0 ? 1 : threads);
    t.skipped_lines = report.skipped_lines;
  } catch (...) {
    raise_python(std::current_exception());
  }
  t.path = std::move(path);
  t.format = std::move(format);
  t.block_tokens = block_tokens;
  const auto& v = t.loaded.view();
  if (v.unit_requests()) {
    for (std::size_t r = 0; r <= v.requests(); ++r) t.unit_offsets.push_back(r);
    for (std::size_t r = 0; r < v.requests(); ++r) t.unit_inputs.push_back(v.input_tokens(r));
  }
  return t;
}

}  // namespace

void bind_trace(nb::module_& m) {
  nb::class_<trace>(m, "Trace",
                    "A request trace loaded by kvtk.load_trace (read-only numpy views of its "
                    "columns share its memory).")
      .def("__len__", [](const trace& t) { return t.loaded.view().requests(); })
      .def_ro("path", &trace::path, "the file it was loaded from")
      .def_ro("format", &trace::format, "its format (auto resolved)")
      .def_ro("block_tokens", &trace::block_tokens, "tokens per block")
      .def_ro("skipped_lines", &trace::skipped_lines, "malformed lines skipped (skip_invalid)")
      .def_prop_ro("block_refs", [](const trace& t) { return t.loaded.view().keys.size(); },
                   "block references (all blocks of all requests)")
      .def_prop_ro("block_keys", [](const trace& t) { return view(t, t.loaded.view().keys); },
                   "every request's block keys, request after request (uint64)")
      .def_prop_ro("block_offsets",
                   [](const trace& t) {
                     const auto& v = t.loaded.view();
                     return view(t, v.unit_requests() ? std::span<const std::uint64_t>(t.unit_offsets)
                                                      : v.offsets);
                   },
                   "request r's keys are block_keys[block_offsets[r]:block_offsets[r+1]]")
      .def_prop_ro("input_tokens",
                   [](const trace& t) {
                     const auto& v = t.loaded.view();
                     return view(t, v.unit_requests() ? std::span<const std::uint64_t>(t.unit_inputs)
                                                      : v.input_length);
                   },
                   "prompt tokens per request")
      .def_prop_ro("output_tokens", [](const trace& t) { return view(t, t.loaded.view().output_length); },
                   "output tokens per request (empty when the trace has none)")
      .def_prop_ro("arrival_s", [](const trace& t) { return view(t, t.loaded.view().arrival_s); },
                   "arrival time per request in seconds (empty when the trace has none)")
      .def_prop_ro("session", [](const trace& t) { return view(t, t.loaded.view().session); },
                   "session id per request (empty when the trace has none)");
  m.def("load_trace", &load_trace, nb::arg("path"), nb::arg("format") = "auto",
        nb::arg("block_tokens") = 0, nb::arg("skip_invalid") = false, nb::arg("threads") = 1,
        "Loads a request trace (any format kvtk reads; block_tokens 0 = the trace's default).");
}

}  // namespace kvtk::python
