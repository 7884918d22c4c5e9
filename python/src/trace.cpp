// python/src/trace.cpp — kvtk._kvtk.Trace: a loaded request trace (the same loader as the CLI:
// a .kvtb file is mapped, any other format read into memory) with numpy views of its columns.
// The views share the trace's memory (zero-copy; for .kvtb, the mapped file) and keep the Trace
// alive; they are read-only. Columns a trace does not have are empty arrays.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/filesystem.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <cmath>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "bindings.hpp"
#include "api/trace_options.hpp"
#include "formats/requests.hpp"
#include "formats/writers.hpp"

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
  std::vector<std::string> warnings;
  try {
    nb::gil_scoped_release release;
    sim::check_request_format(format);
    sim::read_report report;
    t.loaded = sim::load_trace_for(path, format, block_tokens, skip_invalid, report, warnings,
                                   false, threads == 0 ? 1 : threads);
    t.skipped_lines = report.skipped_lines;
  } catch (...) {
    raise_python(std::current_exception());
  }
  // Python's own warnings (the GIL is held again): filterable, and shown once per place.
  for (const std::string& w : warnings) {
    if (PyErr_WarnEx(PyExc_UserWarning, ("kvtk.load_trace: " + w).c_str(), 1) != 0) {
      throw nb::python_error();
    }
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

template <class T>
using column = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

// Copies an optional per-request column, checking its length.
template <class T>
std::vector<T> per_request(const std::optional<column<T>>& a, std::size_t n, const char* name) {
  if (!a) return {};
  if (a->shape(0) != n) {
    throw nb::value_error((std::string("Trace.from_arrays: ") + name + " has " +
                           std::to_string(a->shape(0)) + " entries for " + std::to_string(n) +
                           " requests").c_str());
  }
  return {a->data(), a->data() + n};
}

// A trace from numpy arrays (copied): request r's prefix keys are
// block_keys[block_offsets[r]:block_offsets[r+1]], used as given.
trace from_arrays(const any_array& keys_given, const any_array& offsets_given,
                  const any_array& inputs_given, std::optional<column<double>> arrival_s,
                  std::optional<any_array> output_given, std::optional<any_array> session_given,
                  std::uint32_t block_tokens) {
  const block_keys keys_checked(keys_given, "Trace.from_arrays: block_keys");
  const block_keys offsets_checked(offsets_given, "Trace.from_arrays: block_offsets");
  const block_keys inputs_checked(inputs_given, "Trace.from_arrays: input_tokens");
  const auto keys = keys_checked.span(), offsets = offsets_checked.span(), inputs = inputs_checked.span();
  const std::size_t n = inputs.size();
  if (block_tokens == 0) throw nb::value_error("Trace.from_arrays: block_tokens must be >= 1");
  if (offsets.size() != n + 1 || offsets[0] != 0 || offsets[n] != keys.size()) {
    throw nb::value_error("Trace.from_arrays: block_offsets must have len(input_tokens) + 1 "
                          "entries, from 0 to len(block_keys)");
  }
  kvtk::prefix::prefix_trace p;
  p.block_tokens = block_tokens;
  for (std::size_t r = 0; r < n; ++r) {
    const std::uint64_t a = offsets[r], b = offsets[r + 1];
    if (b < a) throw nb::value_error("Trace.from_arrays: block_offsets must not decrease");
    p.add({keys.data() + a, keys.data() + b}, inputs[r]);
  }
  p.arrival_s = per_request(arrival_s, n, "arrival_s");
  auto unsigned_column = [&](const std::optional<any_array>& a, const char* name) {
    std::vector<std::uint64_t> out;
    if (!a) return out;
    const block_keys checked(*a, (std::string("Trace.from_arrays: ") + name).c_str());
    if (checked.size() != n) {
      throw nb::value_error((std::string("Trace.from_arrays: ") + name + " has " +
                             std::to_string(checked.size()) + " entries for " + std::to_string(n) +
                             " requests").c_str());
    }
    out.assign(checked.span().begin(), checked.span().end());
    return out;
  };
  p.output_length = unsigned_column(output_given, "output_tokens");
  p.session = unsigned_column(session_given, "session");
  trace t;
  t.format = "kvtb";  // what a command reads it as (saved to a temporary .kvtb)
  t.block_tokens = block_tokens;
  t.loaded = sim::loaded_trace(std::move(p));
  return t;
}

// Writes the trace in `format` (kvtb, kvtk, mooncake, ids, oracle-general) through the same
// writers as `kvtk trace convert`: a temporary beside `path`, renamed when complete; an existing
// file needs force.
void save(const trace& t, const std::filesystem::path& file, const std::string& format,
          bool force) {
  const std::string path = file.string();
  const auto f = sim::parse_format_name(format);
  if (!f || *f == sim::trace_format::bailian) {
    throw nb::value_error(("Trace.save: cannot write format '" + format +
                           "' (kvtb kvtk mooncake ids oracle-general)").c_str());
  }
  try {
    nb::gil_scoped_release release;
    const auto& v = t.loaded.view();
    const auto w = sim::trace_writer::open(path, *f, t.block_tokens, force);
    for (std::size_t r = 0; r < v.requests(); ++r) {
      sim::request_record rec;
      rec.keys = v.blocks(r);
      rec.input_length = v.input_tokens(r);
      rec.block_tokens = v.block_tokens_of(r);
      rec.line = r + 1;
      if (!v.arrival_s.empty()) rec.arrival_s = v.arrival_s[r];
      if (!v.output_length.empty()) rec.output_length = v.output_length[r];
      if (!v.session.empty()) rec.session = v.session[r];
      if (!v.priority.empty()) rec.priority = v.priority[r];
      if (!v.tenant.empty() && v.tenant[r] != 0) rec.tenant = t.loaded.tenant_names()[v.tenant[r]];
      if (!v.request_id.empty() && v.request_id[r] != kvtk::prefix::no_parent) rec.request_id = v.request_id[r];
      if (!v.parent.empty() && v.parent[r] != kvtk::prefix::no_parent) rec.parent = v.parent[r];
      rec.joins = v.joins(r);
      if (!v.turn.empty() && v.turn[r] != kvtk::prefix::no_turn) rec.turn = v.turn[r];
      if (!v.kind.empty() && v.kind[r] != 0) rec.kind = t.loaded.kind_names()[v.kind[r]];
      if (!v.tool_s.empty() && !std::isnan(v.tool_s[r])) rec.tool_s = v.tool_s[r];
      w->add(rec);
    }
    w->finish();
  } catch (...) {
    raise_python(std::current_exception());
  }
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
                   "session id per request (empty when the trace has none)")
      .def_prop_ro("request_id", [](const trace& t) { return view(t, t.loaded.view().request_id); },
                   "the request's own id (Bailian chat_id; 2^64-1 = none; empty when the trace has none)")
      .def_prop_ro("parent", [](const trace& t) { return view(t, t.loaded.view().parent); },
                   "its parent request's id (2^64-1 = a root; empty when the trace has none)")
      .def_prop_ro("turn", [](const trace& t) { return view(t, t.loaded.view().turn); },
                   "its turn in its session (2^32-1 = none; empty when the trace has none)")
      .def_prop_ro("kind", [](const trace& t) { return view(t, t.loaded.view().kind); },
                   "index into kind_names per request (0 = none; empty when the trace has none)")
      .def_prop_ro("tool_s", [](const trace& t) { return view(t, t.loaded.view().tool_s); },
                   "seconds of the tool call that ended each reply (NaN = none; empty when the "
                   "trace has none)")
      .def_prop_ro("join_offsets", [](const trace& t) { return view(t, t.loaded.view().join_offsets); },
                   "fan-in: request r's further parents are join_ids[join_offsets[r]:join_offsets[r+1]] "
                   "(empty when no request has several parents)")
      .def_prop_ro("join_ids", [](const trace& t) { return view(t, t.loaded.view().join_ids); },
                   "fan-in: the ids of the parents after the first, per join_offsets")
      .def_prop_ro("kind_names",
                   [](const trace& t) {
                     const auto k = t.loaded.kind_names();
                     return std::vector<std::string>(k.begin(), k.end());
                   },
                   "the trace's request kinds (Bailian type; '' first)")
      .def_static("from_arrays", &from_arrays, nb::arg("block_keys"), nb::arg("block_offsets"),
                  nb::arg("input_tokens"), nb::arg("arrival_s").none() = nb::none(),
                  nb::arg("output_tokens").none() = nb::none(),
                  nb::arg("session").none() = nb::none(), nb::arg("block_tokens") = 512,
                  "A trace from numpy arrays (copied); keys are prefix keys, used as given.")
      .def("save", &save, nb::arg("path"), nb::arg("format") = "kvtb", nb::arg("force") = false,
           "Writes the trace (kvtb, kvtk, mooncake, ids, oracle-general); an existing file "
           "needs force=True.");
  m.def("load_trace", &load_trace, nb::arg("path"), nb::arg("format") = "auto",
        nb::arg("block_tokens") = 0, nb::arg("skip_invalid") = false, nb::arg("threads") = 1,
        "Loads a request trace (any format kvtk reads; block_tokens 0 = the trace's default).");
}

}  // namespace kvtk::python
