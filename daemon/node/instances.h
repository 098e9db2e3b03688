// Instances and what they lie over: registered shapes, datatypes, clients' own process memory, hop
// windows and direct-read leases (node_instances.cc, node_datatypes.cc, node_private.cc,
// node_direct_read.cc).
// Node::instances() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Instances {
 public:
  explicit Instances(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Instances are registered once and copied by handle (FALCON-X's
  // memoized translation: the shape is validated here, once).
  Result<std::pair<uint64_t, uint64_t>> RegisterInstance(SessionRef session,
                                                         const InstanceSpec& spec);

  Status UnregisterInstance(SessionRef session, uint64_t instance);

  // Datatypes (node_datatypes.cc; FALCON-X's memoized translation): a
  // session registers a datatype once and names it by handle in later
  // datatypes and instances; the canonical form of `count` elements of it
  // is computed once per count and kept with the handle. At most
  // daemon.max_datatypes_per_session (RESOURCE_EXHAUSTED); handles live
  // until the session ends.
  Result<DatatypeReport> RegisterDatatype(SessionRef session, const Datatype& type);

  // The session's datatype `handle` (NOT_FOUND: not its own).
  Result<Datatype> LookupDatatype(SessionRef session, uint64_t handle) const;

  // LookupDatatype bound to `session`: how the wire decoders resolve
  // `registered` handles in a datatype message (proto/datatype_wire.h).
  std::function<Result<Datatype>(uint64_t)> DatatypeHandles(SessionRef session) const;

  // Client process memory (node_private.cc). A local-socket session
  // registers [address, address + bytes) of its own process (the one
  // SO_PEERCRED named; pinned by a pidfd at the first call, after the
  // identity check of channels/cma/client_process.h) for instances the
  // daemon reaches by CMA. The range lives until the session ends; copies
  // that use it afterwards are refused. Sessions without credentials
  // (gRPC): FAILED_PRECONDITION. Bad ranges: INVALID_ARGUMENT; more than
  // daemon.max_private_ranges_per_session: RESOURCE_EXHAUSTED. `mem`,
  // `maps`: the client's own /proc/self files, when it passed them
  // (ClientProcess::Open).
  Result<uint64_t> RegisterPrivate(SessionRef session, uint64_t address, uint64_t bytes,
                                   UniqueFd mem = UniqueFd(), UniqueFd maps = UniqueFd());

  // Lets other sessions of the same uid register instances over the
  // range; sessions of any other uid never can (NOT_FOUND for them).
  // `serve`: the publisher's serve window (docs/guides/client-memory.md, "Served reads"), told
  // to readers with each lease of the range; nullopt when it serves none.
  // INVALID_ARGUMENT for a window no client library makes.
  struct ServeWindowRef {
    int fd = -1;  // in the publisher's process
    uint64_t bytes = 0;
    uint64_t token = 0;
  };

  Status PublishPrivate(SessionRef session, uint64_t range,
                        std::optional<ServeWindowRef> serve = std::nullopt);

  // The session will run the hops of its copies that touch its own private
  // memory itself (docs/guides/client-memory.md, "Hops the client runs itself"): makes its hop
  // window (daemon.own_hop_window_mib of shared memory) and returns it;
  // `wake` tells the client that work waits (its completion eventfd).
  // FAILED_PRECONDITION without a cma channel, with the window size 0, over
  // gRPC, or a second time.
  struct OwnHopsWindow {
    int fd = -1;  // the node keeps it; valid for the session's life
    uint64_t bytes = 0;
  };

  Result<OwnHopsWindow> EnableOwnHops(SessionRef session, std::function<void()> wake);

  // A lease for the session to copy instance `src` (over another
  // process's private range it may use) into `dst` (over a range it
  // registered itself, so in its own process) with its own
  // process_vm_readv calls (docs/guides/client-memory.md, "Direct reads"; node_direct_read.cc).
  // `epoch` is the session's ControlHeader::lease_epoch: the node adds one
  // to it when the source range ends. NOT_FOUND for instances that are not
  // the session's or a range that ended; FAILED_PRECONDITION when the pair
  // does not qualify (the copy then goes through the daemon as before).
  struct DirectRead {
    pid_t pid = 0;
    UniqueFd pidfd;               // a duplicate of the node's pidfd of the source process
    uint64_t remote_address = 0;  // the program's source offset 0, in that process
    uint64_t local_address = 0;   // its destination offset 0, in the session's
    uint64_t src_span = 0, dst_span = 0;
    std::shared_ptr<const CopyProgram> program;
    uint32_t epoch = 0;
    std::optional<ServeWindowRef> serve;  // the source's publisher serves reads
    // A staged lease (DirectReadResponse.unpack_programs): `program` packs
    // the source's stream densely; piece k of `piece_bytes` is written by
    // unpack[k] (offsets from local_address). Empty otherwise.
    uint64_t piece_bytes = 0;
    std::vector<CopyProgram> unpack;
  };

  // `served_reads`: the reader copies through the source's serve window
  // when there is one.
  Result<DirectRead> GrantDirectRead(SessionRef session, uint64_t src, uint64_t dst,
                                     std::atomic<uint32_t>* epoch, bool served_reads = false);

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
