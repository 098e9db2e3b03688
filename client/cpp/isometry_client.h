// The C++ client of isometryd: the local shared-memory path.
//
//   auto client = isometry::client::Client::Connect({.local_socket =
//   "/run/isometry/isometry.sock"}); auto src = (*client)->Allocate("sys0", bytes);        //
//   mapped here, owned by this session auto a = (*client)->Register(*src, 0, aos_shape);     //
//   validated once, then used by handle auto done = (*client)->Copy(a, b);                    //
//   through the submission ring
//
// Connect() performs the handshake on the daemon's unix socket (the daemon
// identifies this process by SO_PEERCRED) and maps the control segment
// holding the submission and completion rings. Everything is RAII: an
// Allocation unmaps and frees itself, an Instance unregisters, and
// destroying the Client ends the session (the daemon then frees whatever
// the session still held and cancels its transfers).
//
// Thread-safety: a Client may be used from several threads at once.
// Allocations and Instances may outlive their Client: the session ends when
// the Client is destroyed, and their mappings stay valid until they go.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "core/copy_options.h"
#include "core/datatype.h"
#include "core/instance.h"
#include "core/status.h"
#include "proto/ring_abi.h"

namespace isometry::v1 {
class LocalRequest;
class LocalResponse;
}  // namespace isometry::v1

namespace isometry::client {

struct ClientOptions {
  std::string local_socket = "/run/isometry/isometry.sock";
  std::string name = "cpp";
  // Run, in this process, the hops of Copy() calls that read or write this
  // process's registered private memory (docs/guides/client-memory.md, "Hops the client runs
  // itself"): the daemon hands them over through a hop window made at the
  // first RegisterPrivate, and the thread waiting in Copy() runs them at
  // memcpy speed instead of the daemon's one system call per run. Copies
  // queued with Submit() are not handed over (nobody may be waiting).
  // Falls back to CMA when the daemon offers no window.
  bool run_own_hops = true;
  // Copy() from an instance over another process's published private
  // range into one over this session's own range (a datatype on either
  // side, or layouts of the same fields and bounds) by a lease (docs/guides/client-memory.md,
  // "Direct reads"): the daemon checks the pair once and sends its copy program; this process then
  // reads the other with its own process_vm_readv calls on the calling thread, which the kernel
  // checks against this process's rights. Such copies skip the daemon's queues and priorities and
  // report transfer 0. Pairs the daemon refuses, and reads the kernel refuses, go through the
  // daemon as before.
  bool direct_reads = true;
  // Threads that share one direct read of 1 MiB or more: 2 = the calling
  // thread and a helper thread the client starts at its first such copy
  // (two cores move memory faster than one); 1 = the calling thread only.
  uint32_t direct_read_threads = 2;
  // Direct reads from a publisher that serves reads (its
  // serve_published) go through its serve window (docs/guides/client-memory.md, "Served
  // reads"): it packs in its own process while this one unpacks, with no
  // system call a run. Off: such copies read through the kernel.
  bool served_reads = true;
  // PrivateRange::Publish() also serves reads of the range: a thread of
  // this client (started at the first Publish) packs what readers of this
  // uid copy out of it, in this process, into a 12 MiB shared window they
  // map. It spins serve_spin_us after its last work, then sleeps. The
  // range must stay mapped while published (this process reads it).
  bool serve_published = true;
  uint32_t serve_spin_us = 1000;
  // Microseconds a thread waiting for a completion spins before it sleeps
  // on the completion eventfd (0: sleep at once). Spinning saves a wakeup
  // on small copies (the daemon skips the eventfd while the client spins)
  // but holds a core; on a machine with fewer free cores than spinning
  // threads it can lengthen the tail instead.
  uint32_t spin_us = 50;
};

class Client;

class Allocation {
 public:
  Allocation(Allocation&& o) noexcept;
  Allocation& operator=(Allocation&& o) noexcept;
  Allocation(const Allocation&) = delete;
  Allocation& operator=(const Allocation&) = delete;
  ~Allocation();

  uint64_t id() const { return id_; }
  // Null for another client's allocation with watched regions (Client::Map):
  // its bytes are reached only through copies, which apply the watch.
  std::byte* data() const { return data_; }
  uint64_t size() const { return size_; }
  // Lets every client of this daemon map and use it; it then outlives this
  // session (the daemon keeps it until the owner frees it).
  Status Publish();

 private:
  friend class Client;
  Allocation(std::shared_ptr<void> c, uint64_t id, std::byte* data, uint64_t size, uint64_t mapped,
             bool owned)
      : client_(std::move(c)), id_(id), data_(data), size_(size), mapped_(mapped), owned_(owned) {}
  void Release();
  std::shared_ptr<void> client_;  // the connection (Client::Impl)
  uint64_t id_ = 0;
  std::byte* data_ = nullptr;
  uint64_t size_ = 0;
  uint64_t mapped_ = 0;
  bool owned_ = false;  // false for a mapped published allocation of another client
};

class Instance {
 public:
  Instance(Instance&& o) noexcept;
  Instance& operator=(Instance&& o) noexcept;
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;
  ~Instance();

  uint64_t id() const { return id_; }
  uint64_t total_bytes() const { return total_; }

 private:
  friend class Client;
  Instance(std::shared_ptr<void> c, uint64_t id, uint64_t total)
      : client_(std::move(c)), id_(id), total_(total) {}
  std::shared_ptr<void> client_;  // the connection (Client::Impl)
  uint64_t id_ = 0;
  uint64_t total_ = 0;
};

// A range of this process's own memory registered with the daemon, which
// reaches it by CMA (process_vm_readv/writev) instead of through a pool:
// no copy into shared memory first. It lives until the session ends (the
// Client is destroyed); the memory must stay mapped that long, or copies
// touching unmapped pages fail naming the address. Copyable (a handle).
class PrivateRange {
 public:
  uint64_t id() const { return id_; }
  void* address() const { return address_; }
  uint64_t size() const { return size_; }
  // Lets other sessions of this process's uid register instances over it
  // (Client::RegisterPrivateInstance with id()); no other uid ever can.
  // With ClientOptions::serve_published (the default) this client also
  // packs, in this process, what their copies read out of it (docs/guides/client-memory.md,
  // "Served reads"); the range must then stay mapped while published.
  Status Publish();

 private:
  friend class Client;
  PrivateRange(std::shared_ptr<void> c, uint64_t id, void* address, uint64_t size)
      : client_(std::move(c)), id_(id), address_(address), size_(size) {}
  std::shared_ptr<void> client_;  // the connection (Client::Impl)
  uint64_t id_ = 0;
  void* address_ = nullptr;
  uint64_t size_ = 0;
};

struct Completion {
  // 0 when the daemon rejected the submission, and for a direct read
  // (ClientOptions::direct_reads), which is no transfer of the daemon.
  uint64_t transfer = 0;
  Status status;
};

// `count` elements of an MPI-style datatype (core/datatype.h) from the
// instance's origin (MPI's buf: the offset given), instead of a layout
// (docs/concepts/datatypes.md, "Datatypes"). With `handle` (Client::RegisterDatatype) the type
// travels by handle and the daemon reuses its translation; `type` must
// then be the type registered.
struct Elements {
  Datatype type;
  int64_t count = 1;
  uint64_t handle = 0;
};
// What an instance holds: an index space with a layout, or elements of a
// datatype. Copies between a datatype instance and any other move packed
// streams (MPI_Pack order on each side).
using Description = std::variant<InstanceShape, Elements>;

// A distributed instance (docs/guides/redistribution.md, "Redistributing between jobs (M:N)"):
// a global index space of 1..4 dimensions, one distribution per dimension
// over a process grid, ranks numbered row-major over the grid (or
// column-major), elements of `element_bytes` bytes.
struct DimDistribution {
  enum class Kind : uint8_t { kBlock, kCyclic, kBlockCyclic };
  Kind kind = Kind::kBlock;
  uint64_t block = 0;  // kBlockCyclic only
};
struct DistributedSpec {
  std::vector<uint64_t> extents;
  std::vector<DimDistribution> dists;
  std::vector<uint64_t> grid;
  bool column_major = false;
  uint64_t element_bytes = 0;
};
struct DistributedInfo {
  std::string distribution;  // the daemon's description
  uint64_t ranks = 0;
  uint64_t joined = 0;  // complete when joined == ranks
};

class Client {
 public:
  static Result<std::unique_ptr<Client>> Connect(const ClientOptions& options);
  ~Client();

  const std::string& session() const;
  // The session's public number, as the daemon's logs and `isoctl
  // transfers` show it (the token above is the secret).
  uint64_t session_id() const;
  // False once either side closed the local socket: the daemon ended the
  // session (or is gone), or this Client is being destroyed. Never blocks.
  bool alive() const;

  Result<Allocation> Allocate(const std::string& memory, uint64_t bytes);
  // Maps an allocation another client published. One with watched
  // regions (Active Access) comes without memory (data() null): register
  // instances on it and copy; the watch sees every access that way.
  Result<Allocation> Map(uint64_t published_allocation);
  Result<Instance> Register(const Allocation& allocation, uint64_t offset, const Description& what);
  // An instance in a file of a DSK memory (`file` relative to its
  // directory), starting at `offset` bytes into the file.
  Result<Instance> RegisterFile(const std::string& memory, const std::string& file, uint64_t offset,
                                const Description& what);
  // Another node's memory ("node-b:sys0"): an allocation published there
  // (its id on that node), `offset` bytes in. Files of another node's DSK
  // memory go through RegisterFile("node-b:dsk0", ...). Copies between
  // instances of different nodes are planned end to end by this daemon.
  Result<Instance> RegisterRemote(const std::string& memory, uint64_t allocation, uint64_t offset,
                                  const Description& what);

  // Registers [address, address + bytes) of this process's memory
  // (docs/guides/client-memory.md, "Client process memory"). Errors: INVALID_ARGUMENT for an
  // empty or wrapping range, RESOURCE_EXHAUSTED past
  // daemon.max_private_ranges_per_session, PERMISSION_DENIED when the
  // daemon's identity check refuses this process (a setuid program, one
  // that is not dumpable, ...).
  Result<PrivateRange> RegisterPrivate(void* address, uint64_t bytes);
  // Registers a datatype once for this session; its handle goes in
  // Elements::handle. Errors: INVALID_ARGUMENT for a type the daemon will
  // not serve, RESOURCE_EXHAUSTED past daemon.max_datatypes_per_session.
  Result<uint64_t> RegisterDatatype(const Datatype& type);
  // An instance whose first byte is `offset` bytes into the range; all
  // its storage (shape.total_bytes()) must lie inside it.
  Result<Instance> Register(const PrivateRange& range, uint64_t offset, const Description& what);
  // The same by range id: a range this session registered, or one that
  // another session of this uid published (NOT_FOUND otherwise).
  Result<Instance> RegisterPrivateInstance(uint64_t private_range, uint64_t offset,
                                           const Description& what);

  // Queues a copy of the source's whole index space; returns a ticket for
  // Wait(). Blocks only while the submission ring is full.
  Result<uint64_t> Submit(const Instance& src, const Instance& dst, int priority = 0);
  // Blocks until that ticket's completion arrives.
  Completion Wait(uint64_t ticket);
  // Wait() for at most `timeout`: nullopt when the completion has not
  // arrived by then (the ticket stays waitable). Completions of other
  // tickets are collected meanwhile, so the daemon can take more
  // submissions while one copy runs long.
  std::optional<Completion> WaitFor(uint64_t ticket, std::chrono::milliseconds timeout);
  // Submit + Wait.
  Completion Copy(const Instance& src, const Instance& dst, int priority = 0);
  // Both with the copy's options (core/copy_options.h): its priority, and
  // `durable = false` to skip the fdatasync of a DSK destination before it
  // replaces its target (gRPC's CopyRequest.no_sync; the rename still
  // makes it all-or-nothing).
  Result<uint64_t> Submit(const Instance& src, const Instance& dst, const CopyOptions& options);
  Completion Copy(const Instance& src, const Instance& dst, const CopyOptions& options);
  // Submit(), and the daemon reports the copy's transfer id as soon as it
  // accepts it (TransferOf): what Cancel() and the daemon's reports of a
  // running transfer (isoctl transfer, gRPC GetTransfer) take. The id costs
  // a completion slot more, and only when one is free.
  Result<uint64_t> SubmitTracked(const Instance& src, const Instance& dst,
                                 const CopyOptions& options = {});
  // Submit() (SubmitTracked() with `tracked`) that never waits for room:
  // RESOURCE_EXHAUSTED while the submission ring is full, and nothing is
  // queued. For callers that must not block (an event loop): they keep
  // the copy and try again once completions were consumed.
  Result<uint64_t> TrySubmit(const Instance& src, const Instance& dst,
                             const CopyOptions& options = {}, bool tracked = false);
  // The transfer id of a SubmitTracked ticket not yet waited for: waits
  // until the daemon has accepted the copy (its refusal, if it refused it).
  // Wait(ticket) still returns the copy's completion.
  Result<uint64_t> TransferOf(uint64_t ticket);
  // Asks the daemon to cancel a transfer of this session.
  Completion Cancel(uint64_t transfer);

  // Joins distributed instance `name` as `rank` with `local` (an instance
  // of this session whose bounds are the rank's local extents, any
  // strided layout; null for a rank that holds no element). Every rank
  // must give the same spec. The distributed instance ends when the
  // session of any of its ranks ends.
  Result<DistributedInfo> JoinDistributed(const std::string& name, const DistributedSpec& spec,
                                          uint64_t rank, const Instance* local);
  // Redistributes complete `producer` into complete `consumer` (this
  // session a rank of either) and waits until it has ended; other control
  // calls of this Client wait meanwhile.
  Completion Redistribute(const std::string& producer, const std::string& consumer);
  // Copies this session made by direct read so far.
  uint64_t direct_reads_run() const;
  // Those of them that a publisher packed through its serve window
  // (ClientOptions::served_reads).
  uint64_t served_reads_run() const;
  // Hops of this session's copies run in this process so far (0 without a
  // hop window).
  uint64_t own_hops_run() const;
  // Pieces this process packed for readers of its published ranges
  // (served reads), by way: into a buffer of its own first, or straight
  // into its serve window (the way that has been faster is kept).
  struct PackedPieces {
    uint64_t staged = 0, direct = 0;
  };
  PackedPieces served_pieces_packed() const;
  // Writes one raw ring entry (its user_data becomes the ticket): for tests
  // of the daemon's input validation.
  Result<uint64_t> SubmitRaw(const ring::SubmissionEntry& entry);
  // One control request over the local socket, answered in order with the
  // response and the fds it carried (the caller owns them): how the
  // Active Access calls (client/cpp/active_access.h) reach the daemon.
  Result<v1::LocalResponse> Request(const v1::LocalRequest& req, std::vector<int>* fds);

  struct Impl;

 private:
  explicit Client(std::shared_ptr<Impl> impl);
  Result<Allocation> RequestMapping(const v1::LocalRequest& req, bool owned);
  std::shared_ptr<Impl> impl_;
};

}  // namespace isometry::client
