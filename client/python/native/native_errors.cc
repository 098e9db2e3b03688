#include "client/python/native/native_errors.h"

namespace isometry::python {

namespace py = pybind11;

std::string CodeName(absl::StatusCode code) { return absl::StatusCodeToString(code); }

void ThrowError(const std::string& code, const std::string& message) {
  // Imported at each failure, not cached at module load: the package
  // imports this module, so errors.py is loaded by then, and a cached
  // class would outlive a reloaded package.
  py::object cls = py::module_::import("isometry.errors").attr("IsometryError");
  // IsometryError(code, message) is an instance of the code's subclass
  // (NotFound, ...): raised as that class, which pybind11 requires.
  py::object error = cls(code, message);
  PyErr_SetObject(py::type::handle_of(error).ptr(), error.ptr());
  throw py::error_already_set();
}

void ThrowIfError(const Status& status) {
  if (!status.ok()) {
    ThrowError(CodeName(status.code()), std::string(status.message()));
  }
}

}  // namespace isometry::python
