// isometry._native.Allocation: a pool allocation of a native session,
// mapped into this process (the daemon's memfd, client/cpp's Allocation),
// offered to Python without a copy:
//
//   a = session.allocate("sys0", 1 << 20)
//   v = memoryview(a)                        # the buffer protocol
//   x = numpy.frombuffer(a, dtype=numpy.float32)
//   y = numpy.from_dlpack(a)                 # DLPack: 1-D uint8, CPU
//
// Lifetime: the mapping lives until free(), or until the object and every
// view of it are gone. free() refuses (BufferError) while a view is alive
// (a buffer export, or a DLPack tensor its consumer has not deleted):
// unmapping under it would make its next access fault. The end of the
// session does not unmap: views stay valid, though the daemon has freed the
// allocation by then and no copy reaches it any more.
//
// Thread-safety: every method needs the GIL, which orders the state
// changes; free() hands the mapping and the daemon's Free to a shared
// owner and releases the GIL only after, so a call that took the
// allocation before (a registration in flight) finishes with it intact.
#pragma once

#include <pybind11/pybind11.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "client/cpp/isometry_client.h"

namespace isometry::python {

class NativeAllocation {
 public:
  NativeAllocation(client::Allocation allocation, std::string memory);
  NativeAllocation(const NativeAllocation&) = delete;
  NativeAllocation& operator=(const NativeAllocation&) = delete;

  uint64_t id() const { return id_; }
  uint64_t nbytes() const { return nbytes_; }
  const std::string& memory() const { return memory_; }
  bool freed() const { return allocation_ == nullptr; }
  // Live views: buffer exports and DLPack tensors not yet deleted.
  int64_t views() const { return views_.load(std::memory_order_relaxed); }

  // The client's allocation, shared with a call that runs without the
  // GIL; IsometryError FAILED_PRECONDITION once freed.
  std::shared_ptr<client::Allocation> Get() const;
  // Unmaps and frees it in the daemon; BufferError while views are alive;
  // nothing the second time.
  void Free();
  // Lets every client of the daemon map it (client::Allocation::Publish).
  void Publish();

  // The buffer protocol (installed on the class by BindAllocation).
  static int GetBuffer(PyObject* self, Py_buffer* view, int flags);
  static void ReleaseBuffer(PyObject* self, Py_buffer* view);
  // __dlpack__: a "dltensor" capsule over the mapping that holds `self`.
  static pybind11::capsule DLPack(pybind11::object self);
  void ViewEnded() { views_.fetch_sub(1, std::memory_order_relaxed); }

 private:
  std::shared_ptr<client::Allocation> allocation_;  // null once freed
  std::string memory_;
  uint64_t id_ = 0;
  uint64_t nbytes_ = 0;
  std::atomic<int64_t> views_{0};
};

// Adds the class Allocation to `module`.
void BindAllocation(pybind11::module_& module);

}  // namespace isometry::python
