// What Client.copy and Client.acopy need of the extension on every small
// copy, kept out of Python: the native instance a record or id names, the
// asyncio event loop running on this thread, a done copy's TransferInfo
// and the settling of its future. Each Python frame these save is a share
// of a small copy's cost.
//
// The loop: asyncio.get_running_loop() checks the process id with a system
// call on every call (CPython 3.11), the largest part of a small copy's
// submission on a paravirtualized guest. This keeps the loop of the last
// submission while it still runs on the calling thread (base event loops
// set `_thread_id` while they run, and no thread runs two loops at once,
// so it is the running one).
//
// Every function here needs the GIL.
#pragma once

#include <pybind11/pybind11.h>

#include <cstdint>

namespace isometry::python {

class FastPath {
 public:
  // `instances`: the package's dict of native instances by id (this
  // module's Instance objects); `record`: the package's record type whose
  // `id` names one (records.Instance); `watch`: what a new event loop is
  // passed to (RingFutures.watch); `info`: the type a done copy's future
  // is settled with (TransferInfo).
  void Bind(pybind11::dict instances, pybind11::object record, pybind11::function watch,
            pybind11::object info);

  // The native instance `h` names (a bound record or an int id), held;
  // null when it names none or nothing is bound.
  pybind11::object Named(const pybind11::handle& h) const;

  // The event loop running on this thread; raises RuntimeError where none
  // runs. A loop other than the last one is passed to `watch` first.
  pybind11::handle Running();

  // A new future of the loop Running() returned last.
  pybind11::object CreateFuture() const { return create_future_(); }

  // The TransferInfo of done transfer `transfer`: id, state "done" (what
  // the package's ring.completion makes of it).
  pybind11::object DoneInfo(uint64_t transfer) const;

  // Settles `sink` with DoneInfo(transfer) where it is a bare future of
  // `loop` (acopy's with check); true once it is settled, or was already
  // (cancelled by its holder). False, and nothing done, for any other
  // sink, or where Python raised: the package settles those, and reports.
  bool SettleDone(const pybind11::handle& sink, const pybind11::handle& loop,
                  uint64_t transfer) const;

  // Forgets the last loop: after a fork (a child runs none of its
  // parent's loops, though they say they run on this thread) and when the
  // session closes (the loop is not kept alive by it).
  void Forget();

 private:
  pybind11::dict instances_;
  pybind11::object record_;  // a type
  pybind11::function watch_;
  pybind11::object info_;           // a type
  pybind11::object loop_;           // the last loop; null at first
  pybind11::object create_future_;  // its bound create_future
  pybind11::object get_running_loop_;
  pybind11::str id_{"id"};
  pybind11::str thread_id_{"_thread_id"};
  pybind11::str get_loop_{"get_loop"};
  pybind11::str done_{"done"};
  pybind11::str set_result_{"set_result"};
  pybind11::str state_{"state"};
  pybind11::str done_state_{"done"};
};

}  // namespace isometry::python
