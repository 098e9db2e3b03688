// isometry._native: the C++ client (client/cpp/isometry_client.h) for the
// Python package, a session over isometryd's local socket whose copies go
// through the shared-memory submission and completion rings instead of
// gRPC. isometry.Client drives it (isometry/native.py); it is not meant to
// be used on its own.
//
// Every call that waits for the daemon (connect, allocate, register, copy,
// free, publish, unregister, close) releases the GIL while it waits, so
// other Python threads run meanwhile; handles are shared with the call in
// flight, so closing or freeing from another thread never pulls memory from
// under it. Failures raise isometry.errors.IsometryError with the gRPC code
// name (native_errors.h). Destructors of handles Python drops without
// free()/unregister() tell the daemon with the GIL held (one short round
// trip each).
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "client/python/native/native_allocation.h"
#include "client/python/native/native_errors.h"
#include "client/python/native/native_fast_call.h"
#include "client/python/native/native_fast_path.h"
#include "client/python/native/native_ring.h"
#include "core/box.h"
#include "core/copy_options.h"
#include "core/field_space.h"
#include "core/instance.h"
#include "core/layout.h"

namespace isometry::python {
namespace {

namespace py = pybind11;

class NativeInstance {
 public:
  explicit NativeInstance(client::Instance instance)
      : id_(instance.id()),
        total_(instance.total_bytes()),
        instance_(std::make_shared<client::Instance>(std::move(instance))) {}

  uint64_t id() const { return id_; }
  uint64_t total_bytes() const { return total_; }
  bool registered() const { return instance_ != nullptr; }

  std::shared_ptr<client::Instance> Get() const {
    if (!instance_) {
      ThrowError("FAILED_PRECONDITION", "instance " + std::to_string(id_) + " was unregistered");
    }
    return instance_;
  }
  // Unregisters it in the daemon (once a copy in flight with it is done).
  void Unregister() {
    std::shared_ptr<client::Instance> last = std::move(instance_);
    py::gil_scoped_release release;
    last.reset();
  }

 private:
  uint64_t id_ = 0;
  uint64_t total_ = 0;
  std::shared_ptr<client::Instance> instance_;  // null once unregistered
};

class NativePrivateRange {
 public:
  explicit NativePrivateRange(client::PrivateRange range) : range_(std::move(range)) {}
  uint64_t id() const { return range_.id(); }
  void Publish() {
    Status published;
    {
      py::gil_scoped_release release;
      published = range_.Publish();
    }
    ThrowIfError(published);
  }

 private:
  client::PrivateRange range_;  // a copyable handle
};

using FieldList = std::vector<std::pair<std::string, uint64_t>>;

// bounds x fields in `layout`, checked as the daemon checks them; errors
// are INVALID_ARGUMENT naming what is wrong.
InstanceShape ShapeOf(const std::vector<int64_t>& lo, const std::vector<int64_t>& hi,
                      const FieldList& fields, const std::string& layout) {
  if (lo.empty() || lo.size() != hi.size() || lo.size() > static_cast<size_t>(kMaxDims)) {
    ThrowError("INVALID_ARGUMENT",
               "bounds: 1 to " + std::to_string(kMaxDims) + " dimensions, as many lo as hi; got " +
                   std::to_string(lo.size()) + " and " + std::to_string(hi.size()));
  }
  InstanceShape shape;
  shape.bounds.dims = static_cast<int>(lo.size());
  for (size_t d = 0; d < lo.size(); ++d) {
    shape.bounds.lo[d] = lo[d];
    shape.bounds.hi[d] = hi[d];
  }
  std::vector<Field> list;
  for (const auto& [name, size] : fields) {
    if (size > UINT32_MAX) {
      ThrowError("INVALID_ARGUMENT", "field '" + name + "' of " + std::to_string(size) +
                                         " bytes: a field holds at most 4 GiB - 1");
    }
    list.push_back(Field{name, static_cast<uint32_t>(size)});
  }
  shape.fields = ValueOrThrow(FieldSpace::Make(std::move(list)));
  shape.layout = ValueOrThrow(Layout::Parse(layout, shape.bounds.dims));
  return shape;
}

class NativeSession {
 public:
  // `in_process`: private memory is moved in this process where the C++
  // client can (ClientOptions: hops of copy() into and out of its own
  // ranges run on the calling thread, copies out of another process's
  // published range are direct or served reads, and a published range
  // serves reads); false: the daemon moves it all (cma).
  static std::unique_ptr<NativeSession> Connect(const std::string& local_socket,
                                                const std::string& name, uint32_t spin_us,
                                                bool in_process) {
    client::ClientOptions options;
    options.local_socket = local_socket;
    options.name = name;
    options.spin_us = spin_us;
    options.run_own_hops = in_process;
    options.direct_reads = in_process;
    options.served_reads = in_process;
    options.serve_published = in_process;
    Result<std::unique_ptr<client::Client>> connected;
    {
      py::gil_scoped_release release;
      connected = client::Client::Connect(options);
    }
    return std::unique_ptr<NativeSession>(new NativeSession(ValueOrThrow(std::move(connected))));
  }

  const std::string& session() const { return token_; }
  uint64_t session_id() const { return session_id_; }
  bool closed() const { return client_ == nullptr; }
  bool alive() const { return client_ != nullptr && client_->alive(); }

  // Registers [address, address + nbytes) of this process (the caller
  // pins the buffer): the range id and a handle that publishes it.
  std::unique_ptr<NativePrivateRange> RegisterPrivate(uintptr_t address, uint64_t nbytes) {
    std::shared_ptr<client::Client> c = Get();
    Result<client::PrivateRange> registered;
    {
      py::gil_scoped_release release;
      // The address of a buffer the caller pinned (local.pin_buffer), given
      // as the integer Python knows it by.
      // NOLINTNEXTLINE(performance-no-int-to-ptr)
      registered = c->RegisterPrivate(reinterpret_cast<void*>(address), nbytes);
    }
    return std::make_unique<NativePrivateRange>(ValueOrThrow(std::move(registered)));
  }

  std::unique_ptr<NativeAllocation> Allocate(const std::string& memory, uint64_t bytes) {
    std::shared_ptr<client::Client> c = Get();
    Result<client::Allocation> allocated;
    {
      py::gil_scoped_release release;
      allocated = c->Allocate(memory, bytes);
    }
    return std::make_unique<NativeAllocation>(ValueOrThrow(std::move(allocated)), memory);
  }

  std::unique_ptr<NativeInstance> Register(const NativeAllocation& allocation, uint64_t offset,
                                           const std::vector<int64_t>& lo,
                                           const std::vector<int64_t>& hi, const FieldList& fields,
                                           const std::string& layout) {
    std::shared_ptr<client::Client> c = Get();
    std::shared_ptr<client::Allocation> a = allocation.Get();
    client::Description what = ShapeOf(lo, hi, fields, layout);
    return Registered([&] { return c->Register(*a, offset, what); });
  }

  // An instance `offset` bytes into a private range: this session's own
  // (register_private) or one another session of this uid published.
  std::unique_ptr<NativeInstance> RegisterPrivateInstance(uint64_t range, uint64_t offset,
                                                          const std::vector<int64_t>& lo,
                                                          const std::vector<int64_t>& hi,
                                                          const FieldList& fields,
                                                          const std::string& layout) {
    std::shared_ptr<client::Client> c = Get();
    client::Description what = ShapeOf(lo, hi, fields, layout);
    return Registered([&] { return c->RegisterPrivateInstance(range, offset, what); });
  }

  // What this process did itself so far: hops of its copies, direct reads
  // and the served ones among them (Client::own_hops_run and friends).
  py::dict Counters() {
    std::shared_ptr<client::Client> c = Get();
    py::dict d;
    d["own_hops_run"] = c->own_hops_run();
    d["direct_reads_run"] = c->direct_reads_run();
    d["served_reads_run"] = c->served_reads_run();
    return d;
  }

  // Queues a copy of src's whole index space through the rings without
  // waiting, ever (native_ring.h: a full ring keeps it in this process's
  // backlog); `sink` comes back from take() with its completion.
  // `to_loop`: its completion comes from take(…, for_loop=True), which an
  // event loop calls when ring_event_fd is readable.
  void Submit(const NativeInstance& src, const NativeInstance& dst, int priority, py::object sink,
              bool to_loop) {
    // With the GIL held throughout, take() (which needs it to find the
    // sink) cannot see the completion before the sink is filed.
    sinks_.emplace(Queue(src, dst, priority, false, to_loop), std::move(sink));
  }

  // What acopy() and take_for_loop() use (native_fast_path.h): NativePath's
  // dict of instances by id, the record type whose `id` names one, what a
  // new event loop is passed to, and the type a done copy's future gets.
  void BindAsync(py::dict instances, py::type record, py::function watch, py::type info) {
    fast_.Bind(std::move(instances), std::move(record), std::move(watch), std::move(info));
  }

  // The native instances `src` and `dst` name (FastPath::Named), held in
  // `*s` and `*d`; false when either names none.
  bool NamedEnds(const py::handle& src, const py::handle& dst, py::object* s, py::object* d) const {
    *s = fast_.Named(src);
    if (*s) *d = fast_.Named(dst);
    return *s && *d;
  }

  // Client.acopy on the rings, in one call: submit(…, to_loop=True) with a
  // new future of the event loop running on this thread, which it
  // returns (RuntimeError where none runs). None, and nothing submitted,
  // when src or dst is neither a bound record nor the id of a native
  // instance (the package then looks further, or goes over gRPC).
  py::object Acopy(const py::handle& src, const py::handle& dst, int priority, bool check) {
    py::object s, d;
    if (!NamedEnds(src, dst, &s, &d)) return py::none();
    const py::handle loop = fast_.Running();
    py::object future = fast_.CreateFuture();
    Submit(Exactly<NativeInstance>(s), Exactly<NativeInstance>(d), priority,
           check ? future : py::make_tuple(future, false, loop), true);
    return future;
  }

  // acopy() as a plain C function bound to this session (acopy_function):
  // called once per small async copy, it skips pybind11's dispatch, a
  // large share of the call.
  static PyObject* AcopyFast(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    int priority = 0;
    if (!Arity(nargs, 4, "acopy(src, dst, priority, check)") || !IntArg(args[2], &priority)) {
      return nullptr;
    }
    const int check = PyObject_IsTrue(args[3]);
    if (check < 0) return nullptr;
    return Guarded(
        [&] { return Exactly<NativeSession>(self).Acopy(args[0], args[1], priority, check != 0); });
  }

  // Client.copy (waited) on the rings, in one call, the GIL released while
  // it waits: the done copy's TransferInfo (FastPath::DoneInfo);
  // (transfer, code name, message) for one that ended otherwise, or a
  // refusal, as copy() answers, for the package to raise or return; None,
  // and nothing copied, when src or dst is neither a bound record nor the
  // id of a native instance.
  py::object CopyFirst(const py::handle& src, const py::handle& dst, int priority) {
    py::object s, d;
    if (!NamedEnds(src, dst, &s, &d)) return py::none();
    std::shared_ptr<client::Client> c = Get();
    std::shared_ptr<client::Instance> from = Exactly<NativeInstance>(s).Get();
    std::shared_ptr<client::Instance> to = Exactly<NativeInstance>(d).Get();
    client::Completion done;
    {
      py::gil_scoped_release release;
      done = c->Copy(*from, *to, priority);
    }
    if (done.status.ok()) return fast_.DoneInfo(done.transfer);
    return py::make_tuple(done.transfer, CodeName(done.status.code()),
                          std::string(done.status.message()));
  }

  static PyObject* CopyFast(PyObject* self, PyObject* const* args, Py_ssize_t nargs) {
    int priority = 0;
    if (!Arity(nargs, 3, "copy(src, dst, priority)") || !IntArg(args[2], &priority)) {
      return nullptr;
    }
    return Guarded(
        [&] { return Exactly<NativeSession>(self).CopyFirst(args[0], args[1], priority); });
  }

  // AcopyFast bound to `self` (this session's Python object).
  static py::object AcopyFunction(const py::object& self) {
    static PyMethodDef def = {"acopy", AsFastCall(&NativeSession::AcopyFast), METH_FASTCALL,
                              "acopy(src, dst, priority, check), bound"};
    return Bound(&def, self);
  }

  // CopyFast bound to `self`.
  static py::object CopyFunction(const py::object& self) {
    static PyMethodDef def = {"copy", AsFastCall(&NativeSession::CopyFast), METH_FASTCALL,
                              "copy(src, dst, priority), bound"};
    return Bound(&def, self);
  }

  // take(0, for_loop=True) for the event loop `loop`, which runs this
  // call: its own copies that ended done with a bare future (acopy's with
  // check) are settled here (FastPath::SettleDone); the rest come back
  // as take() hands them, for the package to settle.
  py::list TakeForLoop(const py::handle& loop) {
    bool ended = false;
    std::vector<RingDone> done;
    {
      py::gil_scoped_release release;
      done = ring_->Take(0, true, &ended);
    }
    py::list rest;
    for (RingDone& d : done) {
      auto sink = sinks_.find(d.job);
      if (sink == sinks_.end()) continue;
      py::object s = std::move(sink->second);
      sinks_.erase(sink);
      const bool ok = d.code == "OK" && d.message.empty();
      if (ok && fast_.SettleDone(s, loop, d.transfer)) continue;
      rest.append(std::move(s));
      rest.append(d.transfer);
      rest.append(ok ? ok_ : py::str(d.code));
      rest.append(ok ? empty_ : py::str(d.message));
    }
    return rest;
  }

  void ForgetLoop() { fast_.Forget(); }

  // submit(), and the copy's transfer id, which the daemon reports as it
  // accepts the copy (Client::SubmitTracked); raises the daemon's refusal,
  // and `sink` then does not come back from take() unless its completion
  // was taken while this call waited without the GIL.
  uint64_t SubmitWithId(const NativeInstance& src, const NativeInstance& dst, int priority,
                        py::object sink) {
    const uint64_t job = Queue(src, dst, priority, true, false);
    sinks_.emplace(job, std::move(sink));
    Result<uint64_t> transfer;
    {
      py::gil_scoped_release release;
      transfer = ring_->TransferOf(job);
    }
    if (!transfer.ok()) sinks_.erase(job);
    return ValueOrThrow(std::move(transfer));
  }

  // The completions of submit()'s copies that arrived (those submitted
  // to_loop, with `for_loop`), waiting up to `timeout_ms` for the first:
  // [sink, transfer, code name, message, sink, ...], four items a copy in
  // one list (no tuple a copy: each would count towards Python's cyclic
  // collections, a large share of a small copy's cost); None once the
  // session is closed and every one was handed back.
  py::object Take(int timeout_ms, bool for_loop) {
    bool ended = false;
    std::vector<RingDone> done;
    {
      py::gil_scoped_release release;
      done = ring_->Take(timeout_ms, for_loop, &ended);
    }
    if (ended) return py::none();
    py::list out;
    for (RingDone& d : done) {
      auto sink = sinks_.find(d.job);
      if (sink == sinks_.end()) continue;  // submit_with_id raised its refusal
      // A done copy's code and message are the same two objects every time.
      const bool ok = d.code == "OK" && d.message.empty();
      out.append(std::move(sink->second));
      out.append(d.transfer);
      out.append(ok ? ok_ : py::str(d.code));
      out.append(ok ? empty_ : py::str(d.message));
      sinks_.erase(sink);
    }
    return out;
  }

  // The sinks whose completions take() has not handed back, forgotten
  // here: for the caller to fail once the session ended.
  py::list DropSinks() {
    py::list out;
    for (auto& [job, sink] : sinks_) out.append(std::move(sink));
    sinks_.clear();
    return out;
  }

  uint64_t ring_pending() const { return ring_->pending(); }
  int ring_event_fd() const { return ring_->event_fd(); }

  // Copies submitted but still in this process (the ring was full)
  // complete CANCELLED now.
  void EndBacklog() {
    py::gil_scoped_release release;
    ring_->EndBacklog();
  }

  // `iterations` copies src -> dst from C++, the microseconds of each: the
  // C++ client's own latency in the same session, for
  // tools/bench/python_latency.py. Raises on the first failed copy.
  std::vector<double> TimeCopies(const NativeInstance& src, const NativeInstance& dst,
                                 uint32_t iterations) {
    std::shared_ptr<client::Client> c = Get();
    std::shared_ptr<client::Instance> s = src.Get();
    std::shared_ptr<client::Instance> d = dst.Get();
    std::vector<double> us;
    us.reserve(iterations);
    Status failed;
    {
      py::gil_scoped_release release;
      for (uint32_t i = 0; i < iterations && failed.ok(); ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        failed = c->Copy(*s, *d).status;
        const auto t1 = std::chrono::steady_clock::now();
        us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      }
    }
    ThrowIfError(failed);
    return us;
  }

  // `count` copies srcs[i % n] -> dsts[i % n] submitted from C++ without
  // waiting, then waited for: the seconds from the first submission to the
  // last completion, the C++ client's throughput with that many copies in
  // flight, for tools/bench/python_native_bench.py. Raises on the first
  // failed copy.
  double TimeInFlight(const std::vector<const NativeInstance*>& srcs,
                      const std::vector<const NativeInstance*>& dsts, uint32_t count) {
    if (srcs.empty() || srcs.size() != dsts.size()) {
      ThrowError("INVALID_ARGUMENT",
                 "time_in_flight: as many sources as destinations, one or more");
    }
    std::shared_ptr<client::Client> c = Get();
    std::vector<std::shared_ptr<client::Instance>> s, d;
    for (size_t i = 0; i < srcs.size(); ++i) {
      s.push_back(srcs[i]->Get());
      d.push_back(dsts[i]->Get());
    }
    Status failed;
    double seconds = 0;
    {
      py::gil_scoped_release release;
      std::vector<uint64_t> tickets;
      tickets.reserve(count);
      const auto t0 = std::chrono::steady_clock::now();
      for (uint32_t i = 0; i < count && failed.ok(); ++i) {
        Result<uint64_t> t = c->Submit(*s[i % s.size()], *d[i % d.size()]);
        if (t.ok()) {
          tickets.push_back(*t);
        } else {
          failed = t.status();
        }
      }
      for (uint64_t t : tickets) {
        Status done = c->Wait(t).status;
        if (failed.ok()) failed = done;
      }
      seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    ThrowIfError(failed);
    return seconds;
  }

  // Ends the session: the daemon cancels its transfers and frees what it
  // did not publish. Handles stay usable as Python objects (allocations
  // stay mapped); their calls then fail. Nothing the second time.
  // Copies submitted without waiting complete first (take() still hands
  // them back); those still in the backlog, not yet on the rings, complete
  // CANCELLED.
  void Close() {
    fast_.Forget();
    std::shared_ptr<client::Client> last = std::move(client_);
    py::gil_scoped_release release;
    ring_->Stop();
    last.reset();  // once a call in flight on another thread returns
  }

 private:
  explicit NativeSession(std::unique_ptr<client::Client> c)
      : client_(std::move(c)), token_(client_->session()), session_id_(client_->session_id()) {}

  std::shared_ptr<client::Client> Get() const {
    if (!client_) ThrowError("FAILED_PRECONDITION", "this native session is closed");
    return client_;
  }

  // An instance the client's registration `call` makes, run without the GIL.
  template <class Call>
  static std::unique_ptr<NativeInstance> Registered(Call call) {
    Result<client::Instance> registered;
    {
      py::gil_scoped_release release;
      registered = call();
    }
    return std::make_unique<NativeInstance>(ValueOrThrow(std::move(registered)));
  }

  // Queues a copy through the ring reader (RingReader::Submit, `tracked`
  // and `to_loop` as there): its job number.
  uint64_t Queue(const NativeInstance& src, const NativeInstance& dst, int priority, bool tracked,
                 bool to_loop) {
    return ValueOrThrow(ring_->Submit(Get(), src.Get(), dst.Get(),
                                      CopyOptions{.priority = priority}, tracked, to_loop));
  }

  std::shared_ptr<client::Client> client_;  // null once closed
  std::unique_ptr<RingReader> ring_ = std::make_unique<RingReader>();
  // Job -> the Python object its completion settles (ring copies); only
  // touched with the GIL held.
  std::unordered_map<uint64_t, py::object> sinks_;
  FastPath fast_;  // copy and acopy: lookups, the loop, settling
  py::str ok_{"OK"};
  py::str empty_{""};
  std::string token_;
  uint64_t session_id_ = 0;
};

}  // namespace

PYBIND11_MODULE(_native, m) {
  m.doc() = "isometryd's C++ client for isometry.Client's local fast path (shared-memory rings).";
  BindAllocation(m);
  py::class_<NativeInstance>(m, "Instance")
      .def_property_readonly("id", &NativeInstance::id)
      .def_property_readonly("total_bytes", &NativeInstance::total_bytes)
      .def_property_readonly("registered", &NativeInstance::registered)
      .def("unregister", &NativeInstance::Unregister);
  py::class_<NativePrivateRange>(m, "PrivateRange")
      .def_property_readonly("id", &NativePrivateRange::id)
      .def("publish", &NativePrivateRange::Publish);
  py::class_<NativeSession>(m, "Session")
      .def(py::init(&NativeSession::Connect), py::arg("local_socket"), py::arg("name"),
           py::arg("spin_us") = 50, py::arg("in_process") = true)
      .def_property_readonly("session", &NativeSession::session)
      .def_property_readonly("session_id", &NativeSession::session_id)
      .def_property_readonly("closed", &NativeSession::closed)
      .def_property_readonly("alive", &NativeSession::alive)
      .def("register_private", &NativeSession::RegisterPrivate, py::arg("address"),
           py::arg("nbytes"))
      .def("allocate", &NativeSession::Allocate, py::arg("memory"), py::arg("nbytes"))
      .def("register", &NativeSession::Register, py::arg("allocation"), py::arg("offset"),
           py::arg("lo"), py::arg("hi"), py::arg("fields"), py::arg("layout"))
      .def("register_private_instance", &NativeSession::RegisterPrivateInstance, py::arg("range"),
           py::arg("offset"), py::arg("lo"), py::arg("hi"), py::arg("fields"), py::arg("layout"))
      .def("counters", &NativeSession::Counters)
      .def("submit", &NativeSession::Submit, py::arg("src"), py::arg("dst"), py::arg("priority"),
           py::arg("sink"), py::arg("to_loop") = false)
      .def("bind_async", &NativeSession::BindAsync, py::arg("instances"), py::arg("record"),
           py::arg("watch"), py::arg("info"))
      .def("acopy", &NativeSession::Acopy, py::arg("src"), py::arg("dst"), py::arg("priority"),
           py::arg("check"))
      .def("forget_loop", &NativeSession::ForgetLoop)
      .def("acopy_function", &NativeSession::AcopyFunction)
      .def("copy_function", &NativeSession::CopyFunction)
      .def("submit_with_id", &NativeSession::SubmitWithId, py::arg("src"), py::arg("dst"),
           py::arg("priority"), py::arg("sink"))
      .def("take", &NativeSession::Take, py::arg("timeout_ms"), py::arg("for_loop") = false)
      .def("take_for_loop", &NativeSession::TakeForLoop, py::arg("loop"))
      .def("drop_sinks", &NativeSession::DropSinks)
      .def("end_backlog", &NativeSession::EndBacklog)
      .def_property_readonly("ring_pending", &NativeSession::ring_pending)
      .def_property_readonly("ring_event_fd", &NativeSession::ring_event_fd)
      .def("time_copies", &NativeSession::TimeCopies, py::arg("src"), py::arg("dst"),
           py::arg("iterations"))
      .def("time_in_flight", &NativeSession::TimeInFlight, py::arg("srcs"), py::arg("dsts"),
           py::arg("count"))
      .def("close", &NativeSession::Close);
}

}  // namespace isometry::python
