// python/src/module.cpp — the kvtk._kvtk extension module: the version, error translation, and
// the bindings of trace.cpp and commands.cpp. The Python package (python/kvtk/) wraps it.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include <stdexcept>

#include "bindings.hpp"
#include "api/trace_options.hpp"
#include "formats/trace_error.hpp"
#include "util/output_file.hpp"

namespace kvtk::python {

void raise_python(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const kvtk::sim::usage_error& u) {
    throw nb::value_error(u.what());
  } catch (const kvtk::sim::trace_error& t) {
    // kvtk.TraceError lives in the pure-Python layer, so it can carry .path and .line.
    nb::object cls = nb::module_::import_("kvtk").attr("TraceError");
    nb::object err = cls(t.what(), t.file(), t.line());
    PyErr_SetObject(cls.ptr(), err.ptr());
    throw nb::python_error();
  } catch (const std::invalid_argument& i) {
    throw nb::value_error(i.what());
  } catch (const kvtk::sim::output_refused& r) {
    // Refused before anything was written (exists without force, names an input, ...): a usage
    // problem, as the CLI's exit 2.
    throw nb::value_error(r.what());
  } catch (const kvtk::sim::output_error& o) {
    PyErr_SetString(PyExc_OSError, o.what());
    throw nb::python_error();
  }
}

}  // namespace kvtk::python

NB_MODULE(_kvtk, m) {
  m.doc() = "kvtk's C++ library (sim/api) for the kvtk Python package";
  m.attr("__version__") = KVTK_VERSION;
  kvtk::python::bind_trace(m);
  kvtk::python::bind_commands(m);
  kvtk::python::bind_block_cache(m);
  kvtk::python::bind_prefix_tree(m);
}
