// Plain CPython entry points for the extension's per-copy calls.
//
// pybind11's dispatch (overload resolution, argument casters, and a cast
// that looks each argument's type up by name) costs about as much as a
// small copy's submission itself. The few calls Python makes once per
// copy are METH_FASTCALL functions bound to their session instead, and
// read the module's own objects directly. Everything here needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <climits>
#include <exception>

namespace isometry::python {

// The C++ object of `o`, an instance of T's Python class exactly (the
// module's own classes: nothing derives from them). Anything else goes
// through pybind11's cast, which raises its TypeError.
template <class T>
T& Exactly(const pybind11::handle& o) {
  static PyTypeObject* const type = reinterpret_cast<PyTypeObject*>(pybind11::type::of<T>().ptr());
  if (Py_TYPE(o.ptr()) != type) return o.cast<T&>();
  return *static_cast<T*>(
      reinterpret_cast<pybind11::detail::instance*>(o.ptr())->get_value_and_holder().value_ptr());
}

using FastCall = PyObject* (*)(PyObject*, PyObject* const*, Py_ssize_t);

// A METH_FASTCALL function as PyMethodDef holds it.
inline PyCFunction AsFastCall(FastCall f) {
  return reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(f));
}

// `def`'s function bound to `self`, which it keeps alive.
inline pybind11::object Bound(PyMethodDef* def, const pybind11::object& self) {
  PyObject* f = PyCFunction_New(def, self.ptr());
  if (f == nullptr) throw pybind11::error_already_set();
  return pybind11::reinterpret_steal<pybind11::object>(f);
}

// Whether a fast call got `want` arguments; TypeError naming `usage` set
// where not.
inline bool Arity(Py_ssize_t nargs, Py_ssize_t want, const char* usage) {
  if (nargs == want) return true;
  PyErr_Format(PyExc_TypeError, "%s: %zd arguments, got %zd", usage, want, nargs);
  return false;
}

// `o` as an int in `*out`; false with TypeError or OverflowError set.
inline bool IntArg(PyObject* o, int* out) {
  const long v = PyLong_AsLong(o);
  if (v == -1 && PyErr_Occurred() != nullptr) return false;
  if (v < INT_MIN || v > INT_MAX) {
    PyErr_Format(PyExc_OverflowError, "%ld does not fit a C int", v);
    return false;
  }
  *out = static_cast<int>(v);
  return true;
}

// `call`'s object as a new reference; null with the Python error set
// where it threw (what pybind11's dispatch does for its own functions).
template <class Call>
PyObject* Guarded(Call call) {
  try {
    return call().release().ptr();
  } catch (pybind11::error_already_set& e) {
    e.restore();
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_RuntimeError, e.what());
  }
  return nullptr;
}

}  // namespace isometry::python
