#include "client/cpp/isometry_client.h"

#include <poll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <map>
#include <mutex>
#include <thread>

#include "core/strings.h"
#include "isometry.pb.h"
#include "proto/datatype_wire.h"
#include "proto/local_wire.h"

namespace isometry::client {

namespace {

Status FromCode(int32_t code, const std::string& message) {
  if (code == 0) {
    return OkStatus();
  }
  return Status(static_cast<absl::StatusCode>(code), message);
}

void CloseAll(const std::vector<int>& fds) {
  for (int fd : fds) {
    ::close(fd);
  }
}

Result<std::pair<std::byte*, uint64_t>> MapFd(int fd, uint64_t bytes) {
  const uint64_t page = static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t mapped = (std::max<uint64_t>(bytes, 1) + page - 1) / page * page;
  // MAP_POPULATE: the daemon populated the memfd when it made the
  // allocation; this fills this process's page table too, so the client's
  // first pass over its memory takes no page faults (they cost about 0.1 s
  // per GiB of 4 KiB pages on the development VM, paid here instead).
  void* p = mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
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

struct Client::Impl {
  int socket = -1;
  std::string session;
  std::mutex control_mu;  // one request/response at a time
  uint64_t next_tag = 1;  // guarded by control_mu

  std::byte* control = nullptr;
  uint64_t control_mapped = 0;
  ring::ControlHeader* header = nullptr;
  ring::SubmissionEntry* sq = nullptr;
  ring::CompletionEntry* cq = nullptr;
  uint32_t sq_entries = 0, cq_entries = 0;
  int sq_event = -1, cq_event = -1;

  std::mutex sq_mu;
  uint32_t sq_tail = 0;  // guarded by sq_mu
  std::atomic<uint64_t> next_ticket{1};

  std::mutex cq_mu;
  std::condition_variable cq_cv;
  std::map<uint64_t, Completion> done;  // guarded by cq_mu
  bool reaping = false;                 // guarded by cq_mu: one thread polls the eventfd

  // Ends the session now (the daemon sees the socket close); handles that
  // outlive the Client then fail their calls harmlessly.
  void Close() { shutdown(socket, SHUT_RDWR); }

  ~Impl() {
    if (control) {
      munmap(control, control_mapped);
    }
    for (int fd : {socket, sq_event, cq_event}) {
      if (fd >= 0) {
        ::close(fd);
      }
    }
  }

  // One control round trip; fds in the response are returned to the caller.
  Result<v1::LocalResponse> Call(v1::LocalRequest req, std::vector<int>* fds) {
    std::lock_guard lock(control_mu);
    req.set_tag(next_tag++);
    // A connection the daemon refused (too many of this uid's, see README,
    // Security model) has its reason waiting to be read, tag 0, even when
    // the send already failed because the daemon closed it.
    const Status sent = wire::SendFrame(socket, req);
    // Nothing was written: no answer will come.
    if (absl::IsOutOfRange(sent) || absl::IsInvalidArgument(sent)) return sent;
    v1::LocalResponse resp;
    std::vector<int> got;
    const Status received = wire::RecvFrame(socket, &resp, &got);
    if (!received.ok()) {
      return sent.ok() ? received : sent;
    }
    if (resp.tag() == 0 && resp.code() != 0) {
      CloseAll(got);
      return FromCode(resp.code(), "isometryd refused the connection: " + resp.message());
    }
    if (!sent.ok()) {
      CloseAll(got);
      return sent;
    }
    if (resp.tag() != req.tag()) {
      CloseAll(got);
      return Internal("response tag ", resp.tag(), " does not match request ", req.tag());
    }
    Status s = FromCode(resp.code(), resp.message());
    if (!s.ok()) {
      CloseAll(got);
      return s;
    }
    if (fds) {
      *fds = std::move(got);
    } else {
      CloseAll(got);
    }
    return resp;
  }

  // Moves every available completion into `done`. Under cq_mu.
  int Reap() {
    int n = 0;
    uint32_t head = header->cq_head.value.load(std::memory_order_relaxed);
    const uint32_t tail = header->cq_tail.value.load(std::memory_order_acquire);
    while (head != tail) {
      ring::CompletionEntry e;
      std::memcpy(&e, &cq[head & (cq_entries - 1)], sizeof e);
      const uint32_t len = std::min<uint32_t>(e.message_len, sizeof e.message);
      done[e.user_data] = {e.transfer, FromCode(e.code, std::string(e.message, len))};
      ++head;
      ++n;
    }
    header->cq_head.value.store(head, std::memory_order_release);
    // Submissions the daemon left waiting for CQ room can go now.
    if (n > 0 && header->sq_head.value.load(std::memory_order_acquire) !=
                     header->sq_tail.value.load(std::memory_order_acquire)) {
      const uint64_t one = 1;
      (void)!::write(sq_event, &one, sizeof one);
    }
    return n;
  }

  // Sequentially consistent: after clearing client_spinning, the one load
  // that closes the race with the daemon (ring_abi.h).
  bool CompletionsPending() const {
    return header->cq_head.value.load(std::memory_order_relaxed) !=
           header->cq_tail.value.load(std::memory_order_seq_cst);
  }

  Result<uint64_t> Push(ring::SubmissionEntry e) {
    std::unique_lock lock(sq_mu);
    // Ring full: the daemon drains it as it goes, as long as completions
    // are consumed; collect them here so a submit-only caller cannot stall
    // both rings.
    for (int spins = 0;
         sq_tail - header->sq_head.value.load(std::memory_order_acquire) >= sq_entries; ++spins) {
      lock.unlock();
      {
        std::unique_lock cq_lock(cq_mu, std::try_to_lock);
        if (cq_lock.owns_lock() && Reap() > 0) {
          cq_cv.notify_all();
        }
      }
      if (spins > 1000) {
        std::this_thread::sleep_for(std::chrono::microseconds(50));
      }
      lock.lock();
    }
    std::memcpy(&sq[sq_tail & (sq_entries - 1)], &e, sizeof e);
    ++sq_tail;
    header->sq_tail.value.store(sq_tail, std::memory_order_seq_cst);
    // The daemon polls for a while after serving requests: no syscall then.
    if (header->daemon_awake.value.load(std::memory_order_seq_cst) == 0) {
      const uint64_t one = 1;
      if (::write(sq_event, &one, sizeof one) != sizeof one) {
        return Unavailable("cannot signal the daemon: ", ErrnoString(errno));
      }
    }
    return e.user_data;
  }

  Completion Wait(uint64_t ticket) {
    std::unique_lock lock(cq_mu);
    while (true) {
      if (auto it = done.find(ticket); it != done.end()) {
        Completion c = std::move(it->second);
        done.erase(it);
        return c;
      }
      if (Reap() > 0) {
        cq_cv.notify_all();
        continue;
      }
      if (reaping) {
        cq_cv.wait(lock);
        continue;
      }
      reaping = true;
      lock.unlock();
      // Small copies complete within microseconds: spin briefly before
      // sleeping on the eventfd.
      // While it spins the daemon skips the completion eventfd
      // (ring_abi.h, client_spinning); clearing the flag and then looking
      // once more closes the race with a completion published meanwhile.
      header->client_spinning.value.store(1, std::memory_order_seq_cst);
      const auto spin_until = std::chrono::steady_clock::now() + std::chrono::microseconds(50);
      while (!CompletionsPending() && std::chrono::steady_clock::now() < spin_until) {
      }
      header->client_spinning.value.store(0, std::memory_order_seq_cst);
      if (!CompletionsPending()) {
        pollfd p{cq_event, POLLIN, 0};
        const int r = poll(&p, 1, 100);
        uint64_t count;
        if (r > 0) {
          (void)!::read(cq_event, &count, sizeof count);
        }
        if (r == 0 && !DaemonAlive()) {
          lock.lock();
          reaping = false;
          cq_cv.notify_all();
          return {0, Unavailable("isometryd closed the connection")};
        }
      }
      lock.lock();
      reaping = false;
    }
  }

  bool DaemonAlive() const {
    pollfd p{socket, POLLRDHUP, 0};
    return poll(&p, 1, 0) == 0;
  }
};

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
  if (data_) {
    munmap(data_, mapped_);
  }
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
  (void)ImplOf(client_).Call(req, nullptr);
  client_.reset();
}

// ---- Client ----

Client::Client(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
Client::~Client() { impl_->Close(); }

const std::string& Client::session() const { return impl_->session; }

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
  impl->sq_entries = hdr.sq_entries;
  impl->cq_entries = hdr.cq_entries;
  impl->sq = reinterpret_cast<ring::SubmissionEntry*>(impl->control + hdr.sq_offset);
  impl->cq = reinterpret_cast<ring::CompletionEntry*>(impl->control + hdr.cq_offset);
  impl->sq_tail = hdr.sq_tail.value.load();
  impl->session = h.session();
  return std::unique_ptr<Client>(new Client(std::move(impl)));
}

// Sends a request whose response carries one memfd, and maps it.
Result<Allocation> Client::RequestMapping(const v1::LocalRequest& req, bool owned) {
  std::vector<int> fds;
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, &fds));
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

namespace {
void ShapeToProto(const InstanceShape& shape, v1::InstanceSpec* spec) {
  for (int d = 0; d < shape.bounds.dims; ++d) {
    spec->mutable_bounds()->add_lo(shape.bounds.lo[d]);
    spec->mutable_bounds()->add_hi(shape.bounds.hi[d]);
  }
  for (const Field& f : shape.fields.fields()) {
    v1::Field* pf = spec->add_fields();
    pf->set_name(f.name);
    pf->set_size(f.size);
  }
  spec->set_layout(shape.layout.ToString());
}

void DescribeTo(const Description& what, v1::InstanceSpec* spec) {
  if (const auto* shape = std::get_if<InstanceShape>(&what)) {
    ShapeToProto(*shape, spec);
    return;
  }
  const Elements& e = std::get<Elements>(what);
  if (e.handle != 0) {
    spec->mutable_datatype()->set_registered(e.handle);
  } else {
    wire::DatatypeToProto(e.type, spec->mutable_datatype());
  }
  spec->set_count(e.count);
}
}  // namespace

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
  ISO_ASSIGN_OR_RETURN(v1::LocalResponse resp, impl_->Call(req, nullptr));
  return PrivateRange(impl_, resp.register_private().private_range(), address, bytes);
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
  return ImplOf(client_).Call(req, nullptr).status();
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
  return Instance(impl_, resp.register_instance().instance(),
                  resp.register_instance().total_bytes());
}

Result<uint64_t> Client::Submit(const Instance& src, const Instance& dst, int priority) {
  ring::SubmissionEntry e{};
  e.op = static_cast<uint16_t>(ring::Op::kCopy);
  e.priority = priority;
  e.user_data = impl_->next_ticket++;
  e.src_instance = src.id();
  e.dst_instance = dst.id();
  return impl_->Push(e);
}

Result<v1::LocalResponse> Client::Request(const v1::LocalRequest& req, std::vector<int>* fds) {
  return impl_->Call(req, fds);
}

Result<uint64_t> Client::SubmitRaw(const ring::SubmissionEntry& entry) {
  return impl_->Push(entry);
}

Completion Client::Wait(uint64_t ticket) { return impl_->Wait(ticket); }

Completion Client::Copy(const Instance& src, const Instance& dst, int priority) {
  auto ticket = Submit(src, dst, priority);
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
