#include "client/cpp/isometry_client.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "client/cpp/client_impl.h"
#include "client/cpp/description_wire.h"
#include "core/huge_mapping.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "isometry.pb.h"
#include "proto/datatype_wire.h"
#include "proto/local_wire.h"

namespace isometry::client {

namespace {

Result<std::pair<std::byte*, uint64_t>> MapFd(int fd, uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (std::max<uint64_t>(bytes, 1) + page - 1) / page * page;
  // MAP_POPULATE: the daemon populated the memfd when it made the
  // allocation; this fills this process's page table too, so the client's
  // first pass over its memory takes no page faults (they are paid here
  // instead; docs/benchmarks/design-measurements.md, "Pages").
  // 2 MiB-aligned: where the daemon made the pages huge (it does unless
  // the kernel cannot), this mapping takes them as 2 MiB entries too.
  void* p = MapSharedAligned(fd, mapped, MAP_POPULATE);
  if (p == MAP_FAILED) {
    return Internal("mmap of ", bytes, " bytes: ", ErrnoString(errno));
  }
  // A hint for pages that are huge where the node allows shmem THP
  // ("advise"), so the daemon's disk and network I/O sees few large
  // segments. The daemon's own mapping carries it when it populates.
  if (mapped >= (2ull << 20)) {
    (void)::madvise(p, mapped, MADV_HUGEPAGE);
  }
  return std::make_pair(static_cast<std::byte*>(p), mapped);
}

}  // namespace

// ---- Allocation ----

namespace {
Client::Impl& ImplOf(const std::shared_ptr<void>& p) {
  return *static_cast<Client::Impl*>(p.get());
}
}  // namespace

Allocation::Allocation(Allocation&& o) noexcept
    : client_(std::move(o.client_)),
      id_(o.id_),
      data_(std::exchange(o.data_, nullptr)),
      size_(o.size_),
      mapped_(o.mapped_),
      owned_(o.owned_) {}

Allocation& Allocation::operator=(Allocation&& o) noexcept {
  if (this != &o) {
    Release();
    client_ = std::move(o.client_);
    id_ = o.id_;
    data_ = std::exchange(o.data_, nullptr);
    size_ = o.size_;
    mapped_ = o.mapped_;
    owned_ = o.owned_;
  }
  return *this;
}

Allocation::~Allocation() { Release(); }

void Allocation::Release() {
  Unmap(data_, mapped_);
  data_ = nullptr;
  if (client_ && owned_) {
    v1::LocalRequest req;
    req.mutable_free()->set_allocation(id_);
    (void)ImplOf(client_).Call(req, nullptr);
  }
  client_.reset();
}

Status Allocation::Publish() {
  if (!client_) {
    return FailedPrecondition("allocation was released");
  }
  v1::LocalRequest req;
  req.mutable_publish()->set_allocation(id_);
  return ImplOf(client_).Call(req, nullptr).status();
}

// ---- Instance ----

Instance::Instance(Instance&& o) noexcept
    : client_(std::move(o.client_)), id_(o.id_), total_(o.total_) {}

Instance& Instance::operator=(Instance&& o) noexcept {
  if (this != &o) {
    this->~Instance();
    client_ = std::move(o.client_);
    id_ = o.id_;
    total_ = o.total_;
  }
  return *this;
}

Instance::~Instance() {
  if (!client_) {
    return;
  }
  v1::LocalRequest req;
  req.mutable_unregister_instance()->set_instance(id_);
  ImplOf(client_).ForgetInstance(id_);
  (void)ImplOf(client_).Call(req, nullptr);
  client_.reset();
}

// ---- Client ----

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() {
  {
    // The session's ranges end with it: nothing is served past them.
    std::lock_guard lock(impl_->serve_mu);
    impl_->read_server.reset();
  }
  impl_->Close();
}

const std::string& Client::session() const { return impl_->session; }

uint64_t Client::session_id() const { return impl_->session_id; }

bool Client::alive() const {
  // Requests are answered before their call returns, so nothing waits to
  // be read on a live socket; end of stream (0) or an error means closed.
  char byte;
  const ssize_t n = ::recv(impl_->socket, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR));
}

Result<std::unique_ptr<Client>> Client::Connect(const ClientOptions& options) {
  auto impl = std::make_shared<Impl>();
  sockaddr_un addr{};
  if (options.local_socket.size() >= sizeof addr.sun_path) {
    return InvalidArgument("socket path '", options.local_socket, "' is too long");
  }
  impl->socket = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (impl->socket < 0) {
    return Internal("socket: ", ErrnoString(errno));
  }
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, options.local_socket.c_str(), options.local_socket.size() + 1);
  if (connect(impl->socket, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return Unavailable("cannot connect to isometryd at ", options.local_socket, ": ",
                       ErrnoString(errno));
  }
  v1::LocalRequest hello;
  hello.mutable_hello()->set_abi_version(ring::kAbiVersion);
  hello.mutable_hello()->set_client_name(options.name);
  std::vector<int> fds;
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl->Call(hello, &fds));
  if (fds.size() != 3) {
    CloseAll(fds);
    return Internal("handshake returned ", fds.size(), " descriptors, expected 3");
  }
  impl->sq_event = fds[1];
  impl->cq_event = fds[2];
  const v1::HelloResponse& h = resp.hello();
  auto mapped = MapFd(fds[0], h.control_bytes());
  ::close(fds[0]);
  if (!mapped.ok()) {
    return mapped.status();
  }
  impl->control = mapped->first;
  impl->control_mapped = mapped->second;
  impl->header = reinterpret_cast<ring::ControlHeader*>(impl->control);
  const ring::ControlHeader& hdr = *impl->header;
  if (hdr.magic != ring::kMagic || hdr.abi_version != ring::kAbiVersion ||
      hdr.sq_entries != h.sq_entries() || hdr.cq_entries != h.cq_entries() ||
      ring::ControlBytes(hdr.sq_entries, hdr.cq_entries) > h.control_bytes()) {
    return Internal("control segment does not match the handshake");
  }
  impl->sq = {reinterpret_cast<ring::SubmissionEntry*>(impl->control + hdr.sq_offset),
              hdr.sq_entries, &impl->header->sq_head, &impl->header->sq_tail};
  impl->cq = {reinterpret_cast<ring::CompletionEntry*>(impl->control + hdr.cq_offset),
              hdr.cq_entries, &impl->header->cq_head, &impl->header->cq_tail};
  impl->session = h.session();
  impl->session_id = h.session_id();
  impl->want_own_hops = options.run_own_hops;
  impl->want_direct_reads = options.direct_reads;
  impl->want_served_reads = options.served_reads;
  impl->want_serve = options.serve_published;
  impl->serve_spin = std::chrono::microseconds(options.serve_spin_us);
  if (options.direct_read_threads >= 2) impl->direct_helper = std::make_unique<DirectHelper>();
  impl->spin = std::chrono::microseconds(options.spin_us);
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

// Sends a request whose response carries one memfd, and maps it.
Result<Allocation> Client::RequestMapping(const v1::LocalRequest& req, bool owned) {
  std::vector<int> fds;
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, &fds));
  if (!owned && resp.map().watched() && fds.empty()) {
    // Another client's watched allocation: a handle without memory.
    return Allocation(impl_, resp.map().allocation(), nullptr, resp.map().bytes(), 0, false);
  }
  if (fds.size() != 1) {
    CloseAll(fds);
    return Internal("the daemon's answer came without its memory descriptor");
  }
  const uint64_t id = owned ? resp.allocate().allocation() : resp.map().allocation();
  const uint64_t bytes = owned ? resp.allocate().bytes() : resp.map().bytes();
  auto mapped = MapFd(fds[0], bytes);
  ::close(fds[0]);
  if (!mapped.ok()) {
    return mapped.status();
  }
  return Allocation(impl_, id, mapped->first, bytes, mapped->second, owned);
}

Result<Allocation> Client::Allocate(const std::string& memory, uint64_t bytes) {
  v1::LocalRequest req;
  req.mutable_allocate()->set_memory(memory);
  req.mutable_allocate()->set_bytes(bytes);
  return RequestMapping(req, /*owned=*/true);
}

Result<Allocation> Client::Map(uint64_t published_allocation) {
  v1::LocalRequest req;
  req.mutable_map()->set_allocation(published_allocation);
  return RequestMapping(req, /*owned=*/false);
}

Result<Instance> Client::RegisterFile(const std::string& memory, const std::string& file,
                                      uint64_t offset, const Description& what) {
  v1::LocalRequest req;
  v1::InstanceSpec* spec = req.mutable_register_instance()->mutable_spec();
  spec->set_memory(memory);
  spec->set_file(file);
  spec->set_offset(offset);
  DescribeTo(what, spec);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  return Instance(impl_, resp.register_instance().instance(),
                  resp.register_instance().total_bytes());
}

Result<Instance> Client::RegisterRemote(const std::string& memory, uint64_t allocation,
                                        uint64_t offset, const Description& what) {
  v1::LocalRequest req;
  v1::InstanceSpec* spec = req.mutable_register_instance()->mutable_spec();
  spec->set_memory(memory);
  spec->set_allocation(allocation);
  spec->set_offset(offset);
  DescribeTo(what, spec);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  return Instance(impl_, resp.register_instance().instance(),
                  resp.register_instance().total_bytes());
}

Result<Instance> Client::Register(const Allocation& allocation, uint64_t offset,
                                  const Description& what) {
  v1::LocalRequest req;
  v1::InstanceSpec* spec = req.mutable_register_instance()->mutable_spec();
  spec->set_allocation(allocation.id());
  spec->set_offset(offset);
  DescribeTo(what, spec);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  return Instance(impl_, resp.register_instance().instance(),
                  resp.register_instance().total_bytes());
}

Result<PrivateRange> Client::RegisterPrivate(void* address, uint64_t bytes) {
  v1::LocalRequest req;
  req.mutable_register_private()->set_address(reinterpret_cast<uintptr_t>(address));
  req.mutable_register_private()->set_bytes(bytes);
  // This process's own address space and maps, which it may always open:
  // with them the daemon needs no privilege to reach a client of another
  // uid (ClientProcess::Open). Without them (no /proc) it opens them.
  const UniqueFd mem(::open("/proc/self/mem", O_RDWR | O_CLOEXEC));
  const UniqueFd maps(::open("/proc/self/maps", O_RDONLY | O_CLOEXEC));
  std::vector<int> pass;
  if (mem.valid() && maps.valid()) pass = {mem.get(), maps.get()};
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr, pass));
  if (impl_->want_own_hops) std::call_once(impl_->hops_once, [this] { impl_->EnableOwnHops(); });
  const uint64_t begin = reinterpret_cast<uintptr_t>(address);
  {
    std::lock_guard lock(impl_->direct_mu);
    impl_->own_ranges[resp.register_private().private_range()] = {begin, begin + bytes};
  }
  return PrivateRange(impl_, resp.register_private().private_range(), address, bytes);
}

uint64_t Client::direct_reads_run() const {
  return impl_->direct_reads_run.load(std::memory_order_relaxed);
}

uint64_t Client::served_reads_run() const {
  std::lock_guard lock(impl_->served_mu);
  uint64_t n = 0;
  for (const auto& [key, window] : impl_->served_windows) n += window ? window->copies() : 0;
  return n;
}

Client::PackedPieces Client::served_pieces_packed() const {
  std::lock_guard lock(impl_->serve_mu);
  if (!impl_->read_server) return {};
  return {impl_->read_server->pieces_staged(), impl_->read_server->pieces_direct()};
}

uint64_t Client::own_hops_run() const {
  const HopRunner* h = impl_->hops.load(std::memory_order_acquire);
  return h ? h->ran() : 0;
}

Result<DistributedInfo> Client::JoinDistributed(const std::string& name,
                                                const DistributedSpec& spec, uint64_t rank,
                                                const Instance* local) {
  v1::LocalRequest req;
  v1::JoinDistributedRequest* j = req.mutable_join_distributed();
  j->set_name(name);
  j->set_element_bytes(spec.element_bytes);
  j->set_rank(rank);
  j->set_instance(local ? local->id() : 0);
  v1::DistributionSpec* d = j->mutable_distribution();
  for (uint64_t e : spec.extents) d->add_extents(e);
  for (uint64_t g : spec.grid) d->add_grid(g);
  d->set_column_major(spec.column_major);
  for (const DimDistribution& dim : spec.dists) {
    v1::DimDistribution* out = d->add_dists();
    out->set_kind(dim.kind == DimDistribution::Kind::kBlock    ? v1::DIST_BLOCK
                  : dim.kind == DimDistribution::Kind::kCyclic ? v1::DIST_CYCLIC
                                                               : v1::DIST_BLOCK_CYCLIC);
    out->set_block(dim.block);
  }
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  const v1::JoinDistributedResponse& r = resp.join_distributed();
  return DistributedInfo{r.distribution(), r.ranks(), r.joined()};
}

Completion Client::Redistribute(const std::string& producer, const std::string& consumer) {
  v1::LocalRequest req;
  req.mutable_redistribute()->set_producer(producer);
  req.mutable_redistribute()->set_consumer(consumer);
  req.mutable_redistribute()->set_wait(true);
  Result<v1::LocalResponse> resp = impl_->Call(req, nullptr);
  if (!resp.ok()) return Completion{0, resp.status()};
  return Completion{resp->redistribute().transfer(), OkStatus()};
}

Result<uint64_t> Client::RegisterDatatype(const Datatype& type) {
  v1::LocalRequest req;
  wire::DatatypeToProto(type, req.mutable_register_datatype()->mutable_datatype());
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  return resp.register_datatype().handle();
}

Status PrivateRange::Publish() {
  if (!client_) return FailedPrecondition("private range has no client");
  v1::LocalRequest req;
  req.mutable_publish_private()->set_private_range(id_);
  Client::Impl& impl = ImplOf(client_);
  if (impl.want_serve) {
    std::lock_guard lock(impl.serve_mu);
    if (!impl.read_server) {
      // Without a window the range is published all the same: readers
      // then read it through the kernel.
      Result<std::unique_ptr<ReadServer>> s = ReadServer::Start(impl.serve_spin);
      if (s.ok()) impl.read_server = std::move(*s);
    }
    if (impl.read_server) {
      // Served before any reader can lease it.
      impl.read_server->Serve(reinterpret_cast<uintptr_t>(address_), size_);
      v1::ServeWindow* w = req.mutable_publish_private()->mutable_serve();
      w->set_fd(impl.read_server->fd());
      w->set_bytes(impl.read_server->bytes());
      w->set_token(impl.read_server->token());
    }
  }
  return impl.Call(req, nullptr).status();
}

Result<Instance> Client::Register(const PrivateRange& range, uint64_t offset,
                                  const Description& what) {
  return RegisterPrivateInstance(range.id(), offset, what);
}

Result<Instance> Client::RegisterPrivateInstance(uint64_t private_range, uint64_t offset,
                                                 const Description& what) {
  v1::LocalRequest req;
  v1::InstanceSpec* spec = req.mutable_register_instance()->mutable_spec();
  spec->set_private_range(private_range);
  spec->set_offset(offset);
  DescribeTo(what, spec);
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  {
    std::lock_guard lock(impl_->direct_mu);
    impl_->private_instances[resp.register_instance().instance()] = private_range;
  }
  return Instance(impl_, resp.register_instance().instance(),
                  resp.register_instance().total_bytes());
}

namespace {
// The ring entry of a copy, with the next ticket as its user_data.
ring::SubmissionEntry CopyEntry(Client::Impl& impl, const Instance& src, const Instance& dst,
                                const CopyOptions& options) {
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.priority = options.priority;
  if (!options.durable) e.flags |= ring::kFlagNoSync;
  e.user_data = impl.next_ticket++;
  e.src_instance = src.id();
  e.dst_instance = dst.id();
  return e;
}

// Submit, SubmitTracked and TrySubmit.
Result<uint64_t> PushCopy(Client::Impl& impl, const Instance& src, const Instance& dst,
                          const CopyOptions& options, bool tracked, bool wait_for_room) {
  ring::SubmissionEntry e = CopyEntry(impl, src, dst, options);
  if (!tracked) return impl.Push(e, wait_for_room);
  e.flags |= ring::kFlagReportAccepted;
  {
    // Known before it is queued: another thread may wait for it at once.
    std::lock_guard lock(impl.cq_mu);
    impl.tracked.emplace(e.user_data, 0);
  }
  Result<uint64_t> ticket = impl.Push(e, wait_for_room);
  if (!ticket.ok()) {
    std::lock_guard lock(impl.cq_mu);
    impl.tracked.erase(e.user_data);
  }
  return ticket;
}
}  // namespace

Result<uint64_t> Client::Submit(const Instance& src, const Instance& dst, int priority) {
  return Submit(src, dst, CopyOptions{.priority = priority});
}

Result<uint64_t> Client::Submit(const Instance& src, const Instance& dst,
                                const CopyOptions& options) {
  return PushCopy(*impl_, src, dst, options, /*tracked=*/false, /*wait_for_room=*/true);
}

Result<uint64_t> Client::SubmitTracked(const Instance& src, const Instance& dst,
                                       const CopyOptions& options) {
  return PushCopy(*impl_, src, dst, options, /*tracked=*/true, /*wait_for_room=*/true);
}

Result<uint64_t> Client::TrySubmit(const Instance& src, const Instance& dst,
                                   const CopyOptions& options, bool tracked) {
  return PushCopy(*impl_, src, dst, options, tracked, /*wait_for_room=*/false);
}

Result<uint64_t> Client::TransferOf(uint64_t ticket) { return impl_->TransferOf(ticket); }

Result<v1::LocalResponse> Client::Request(const v1::LocalRequest& req, std::vector<int>* fds) {
  return impl_->Call(req, fds);
}

Result<uint64_t> Client::SubmitRaw(const ring::SubmissionEntry& entry) {
  return impl_->Push(entry);
}

Completion Client::Wait(uint64_t ticket) { return impl_->Wait(ticket); }

std::optional<Completion> Client::WaitFor(uint64_t ticket, std::chrono::milliseconds timeout) {
  return impl_->WaitFor(ticket, std::chrono::steady_clock::now() + timeout);
}

Completion Client::Copy(const Instance& src, const Instance& dst, int priority) {
  return Copy(src, dst, CopyOptions{.priority = priority});
}

Completion Client::Copy(const Instance& src, const Instance& dst, const CopyOptions& options) {
  if (std::optional<Completion> direct = impl_->TryDirect(src.id(), dst.id())) return *direct;
  ring::SubmissionEntry e = CopyEntry(*impl_, src, dst, options);
  // This thread waits for it below and runs what the daemon hands over.
  if (impl_->hops.load(std::memory_order_acquire)) e.flags |= ring::kFlagClientRunsHops;
  auto ticket = impl_->Push(e);
  if (!ticket.ok()) {
    return {0, ticket.status()};
  }
  return Wait(*ticket);
}

Completion Client::Cancel(uint64_t transfer) {
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCancel);
  e.user_data = impl_->next_ticket++;
  e.transfer = transfer;
  auto ticket = impl_->Push(e);
  if (!ticket.ok()) {
    return {0, ticket.status()};
  }
  return Wait(*ticket);
}

}  // namespace isometry::client
