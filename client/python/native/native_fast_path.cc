// Client.copy's and Client.acopy's per-copy work in the extension
// (native_fast_path.h).
#include "client/python/native/native_fast_path.h"

#include <pythread.h>

#include <utility>

namespace isometry::python {

namespace py = pybind11;

void FastPath::Bind(py::dict instances, py::object record, py::function watch, py::object info) {
  instances_ = std::move(instances);
  record_ = std::move(record);
  watch_ = std::move(watch);
  info_ = std::move(info);
}

py::object FastPath::Named(const py::handle& h) const {
  if (!instances_) return {};
  py::object id;
  if (Py_TYPE(h.ptr()) == reinterpret_cast<PyTypeObject*>(record_.ptr())) {
    id = h.attr(id_);
  } else if (PyLong_CheckExact(h.ptr())) {
    id = py::reinterpret_borrow<py::object>(h);
  } else {
    return {};
  }
  PyObject* found = PyDict_GetItemWithError(instances_.ptr(), id.ptr());  // borrowed
  if (found == nullptr) {
    if (PyErr_Occurred() != nullptr) throw py::error_already_set();
    return {};
  }
  return py::reinterpret_borrow<py::object>(found);
}

py::handle FastPath::Running() {
  if (loop_) {
    // A loop that is not a base event loop has no _thread_id: asyncio
    // answers for it every time.
    PyObject* runs_on = PyObject_GetAttr(loop_.ptr(), thread_id_.ptr());
    if (runs_on == nullptr) {
      PyErr_Clear();
    } else {
      const bool here = PyLong_CheckExact(runs_on) &&
                        PyLong_AsUnsignedLong(runs_on) == PyThread_get_thread_ident();
      Py_DECREF(runs_on);
      if (PyErr_Occurred() != nullptr) PyErr_Clear();  // not an unsigned long
      if (here) return loop_;
    }
  }
  if (!get_running_loop_) {
    get_running_loop_ = py::module_::import("asyncio").attr("get_running_loop");
  }
  py::object loop = get_running_loop_();  // RuntimeError where none runs
  if (!loop.is(loop_)) {
    watch_(loop);
    create_future_ = loop.attr("create_future");
    loop_ = std::move(loop);
  }
  return loop_;
}

bool FastPath::SettleDone(const py::handle& sink, const py::handle& loop, uint64_t transfer) const {
  if (!info_ || PyTuple_Check(sink.ptr())) return false;
  const auto call = [&](const py::str& method) {
    PyObject* r = PyObject_CallMethodNoArgs(sink.ptr(), method.ptr());
    if (r == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(r);
  };
  try {
    if (!call(get_loop_).is(loop)) return false;
    const int done = PyObject_IsTrue(call(done_).ptr());
    if (done < 0) throw py::error_already_set();
    if (done != 0) return true;  // cancelled by its holder
    const py::object info = DoneInfo(transfer);
    PyObject* r = PyObject_CallMethodOneArg(sink.ptr(), set_result_.ptr(), info.ptr());
    if (r == nullptr) throw py::error_already_set();
    Py_DECREF(r);
    return true;
  } catch (py::error_already_set&) {
    return false;  // the package's settling meets it again, and reports it
  }
}

py::object FastPath::DoneInfo(uint64_t transfer) const {
  py::object info = info_();
  info.attr(id_) = py::int_(transfer);
  info.attr(state_) = done_state_;
  return info;
}

void FastPath::Forget() {
  loop_ = py::object();
  create_future_ = py::object();
}

}  // namespace isometry::python
