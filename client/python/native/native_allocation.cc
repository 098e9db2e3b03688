#include "client/python/native/native_allocation.h"

#include <utility>

#include "client/python/native/native_errors.h"

namespace isometry::python {

namespace py = pybind11;

namespace {

// The DLPack ABI (dlpack.h, unversioned "dltensor" capsules, the form
// NumPy 1.22+ and torch consume): declared here because Debian ships no
// dlpack header, and its layout has been fixed since DLPack 0.2.
struct DLDevice {
  int32_t device_type;  // 1: kDLCPU
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 1: kDLUInt
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // null: compact, row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor* self);
};
constexpr int32_t kDLCPU = 1;
constexpr uint8_t kDLUInt = 1;

// What a tensor owns: its shape, and a reference to the allocation that
// keeps the mapping (and counts the tensor as a view until deleted).
struct TensorContext {
  DLManagedTensor managed{};
  int64_t shape[1] = {0};
  PyObject* owner = nullptr;
};

void DeleteTensor(DLManagedTensor* managed) {
  auto* ctx = static_cast<TensorContext*>(managed->manager_ctx);
  // A consumer may delete its tensor from any thread, with or without
  // the GIL.
  PyGILState_STATE gil = PyGILState_Ensure();
  py::handle(ctx->owner).cast<NativeAllocation&>().ViewEnded();
  Py_DECREF(ctx->owner);
  PyGILState_Release(gil);
  delete ctx;
}

// A capsule nobody consumed still owns its tensor (a consumer renames the
// ones it takes to "used_dltensor" and deletes them itself).
void DeleteUnusedCapsule(PyObject* capsule) {
  if (!PyCapsule_IsValid(capsule, "dltensor")) return;
  PyObject *type, *value, *traceback;
  PyErr_Fetch(&type, &value, &traceback);
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
  if (managed != nullptr && managed->deleter != nullptr) managed->deleter(managed);
  PyErr_Restore(type, value, traceback);
}

[[noreturn]] void ThrowBufferError(const std::string& message) {
  PyErr_SetString(PyExc_BufferError, message.c_str());
  throw py::error_already_set();
}

}  // namespace

NativeAllocation::NativeAllocation(client::Allocation allocation, std::string memory)
    : memory_(std::move(memory)), id_(allocation.id()), nbytes_(allocation.size()) {
  allocation_ = std::make_shared<client::Allocation>(std::move(allocation));
}

std::shared_ptr<client::Allocation> NativeAllocation::Get() const {
  if (!allocation_) {
    ThrowError("FAILED_PRECONDITION", "allocation " + std::to_string(id_) + " was freed");
  }
  return allocation_;
}

void NativeAllocation::Free() {
  if (!allocation_) return;
  if (const int64_t n = views(); n > 0) {
    ThrowBufferError("allocation " + std::to_string(id_) + " is still viewed by " +
                     std::to_string(n) +
                     " buffer(s) (memoryview, NumPy array, DLPack tensor): release them before "
                     "freeing it, its memory would be unmapped under them");
  }
  std::shared_ptr<client::Allocation> last = std::move(allocation_);
  py::gil_scoped_release release;
  last.reset();  // unmaps and frees in the daemon, unless a call still holds it
}

void NativeAllocation::Publish() {
  std::shared_ptr<client::Allocation> allocation = Get();
  Status published;
  {
    py::gil_scoped_release release;
    published = allocation->Publish();
  }
  ThrowIfError(published);
}

int NativeAllocation::GetBuffer(PyObject* self, Py_buffer* view, int flags) {
  view->obj = nullptr;
  auto& a = py::handle(self).cast<NativeAllocation&>();
  if (!a.allocation_ || a.allocation_->data() == nullptr) {
    PyErr_SetString(PyExc_BufferError,
                    ("allocation " + std::to_string(a.id_) + " was freed").c_str());
    return -1;
  }
  if (PyBuffer_FillInfo(view, self, a.allocation_->data(), static_cast<Py_ssize_t>(a.nbytes_),
                        /*readonly=*/0, flags) != 0) {
    return -1;
  }
  a.views_.fetch_add(1, std::memory_order_relaxed);
  return 0;
}

void NativeAllocation::ReleaseBuffer(PyObject* self, Py_buffer* /*view*/) {
  py::handle(self).cast<NativeAllocation&>().ViewEnded();
}

py::capsule NativeAllocation::DLPack(py::object self) {
  auto& a = self.cast<NativeAllocation&>();
  if (!a.allocation_ || a.allocation_->data() == nullptr) {
    ThrowBufferError("allocation " + std::to_string(a.id_) + " was freed");
  }
  auto* ctx = new TensorContext;
  ctx->shape[0] = static_cast<int64_t>(a.nbytes_);
  ctx->owner = self.release().ptr();  // the tensor's reference
  DLTensor& t = ctx->managed.dl_tensor;
  t.data = a.allocation_->data();
  t.device = {kDLCPU, 0};
  t.ndim = 1;
  t.dtype = {kDLUInt, 8, 1};
  t.shape = ctx->shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  ctx->managed.manager_ctx = ctx;
  ctx->managed.deleter = DeleteTensor;
  a.views_.fetch_add(1, std::memory_order_relaxed);
  PyObject* capsule = PyCapsule_New(&ctx->managed, "dltensor", DeleteUnusedCapsule);
  if (capsule == nullptr) {
    DeleteTensor(&ctx->managed);
    throw py::error_already_set();
  }
  return py::reinterpret_steal<py::capsule>(capsule);
}

void BindAllocation(py::module_& module) {
  py::class_<NativeAllocation> cls(module, "Allocation", py::buffer_protocol(), R"doc(
A pool allocation mapped into this process (see isometry.Allocation.buffer).
A writable buffer: memoryview(a), numpy.frombuffer(a, dtype) and
numpy.from_dlpack(a) view its bytes without a copy.)doc");
  // pybind11's own buffer slots cannot count views; these do, so free()
  // can refuse to unmap memory a view still points at.
  auto* heap = reinterpret_cast<PyHeapTypeObject*>(cls.ptr());
  heap->as_buffer.bf_getbuffer = &NativeAllocation::GetBuffer;
  heap->as_buffer.bf_releasebuffer = &NativeAllocation::ReleaseBuffer;
  cls.def_property_readonly("id", &NativeAllocation::id)
      .def_property_readonly("nbytes", &NativeAllocation::nbytes)
      .def_property_readonly("memory", &NativeAllocation::memory)
      .def_property_readonly("freed", &NativeAllocation::freed)
      .def_property_readonly("views", &NativeAllocation::views,
                             "Live views: buffer exports and DLPack tensors not yet deleted.")
      .def("free", &NativeAllocation::Free,
           "Unmaps it and frees it in the daemon; BufferError while views are alive.")
      .def("publish", &NativeAllocation::Publish)
      .def(
          "__dlpack__",
          [](py::object self, const py::object& stream, const py::object& /*max_version*/,
             const py::object& dl_device, const py::object& copy) {
            // CPU memory: no stream to order against (the DLPack rule for
            // kDLCPU), and no device but this one.
            if (!stream.is_none()) ThrowBufferError("a CPU allocation takes no stream");
            if (!dl_device.is_none() && !dl_device.equal(py::make_tuple(kDLCPU, 0))) {
              ThrowBufferError("a pool allocation lives on the CPU (device (1, 0))");
            }
            if (!copy.is_none() && copy.cast<bool>()) {
              ThrowBufferError("copy=True: this allocation is only ever viewed, never copied");
            }
            return NativeAllocation::DLPack(std::move(self));
          },
          py::arg("stream") = py::none(), py::kw_only(), py::arg("max_version") = py::none(),
          py::arg("dl_device") = py::none(), py::arg("copy") = py::none())
      .def("__dlpack_device__", [](const NativeAllocation&) { return py::make_tuple(kDLCPU, 0); })
      .def("__repr__", [](const NativeAllocation& a) {
        return "<isometry._native.Allocation id=" + std::to_string(a.id()) +
               " nbytes=" + std::to_string(a.nbytes()) + (a.freed() ? " freed>" : ">");
      });
}

}  // namespace isometry::python
