// Client pool memory: allocations, publishing, reads and writes (node_pools.cc, node_inventory.cc).
// Node::pools() hands it out (node.h: what every service promises).
#pragma once

#include "daemon/node/node.h"

namespace isometry::node {

class Pools {
 public:
  explicit Pools(Node::Impl& impl) : impl_(&impl) {}  // the node makes it

  // Pool memory. The report's fd is what clients map.
  Result<AllocationReport> Allocate(SessionRef session, const std::string& memory, uint64_t bytes);

  // The owner frees its allocation; a published one whose owner has left
  // may be freed by a session of the same (known) uid, or the operator.
  // The operator needs no session of its own to free an orphan (an empty
  // or unknown `session` with `is_operator`).
  Status Free(SessionRef session, uint64_t allocation, bool is_operator = false);

  // Published allocations outlive their session: a uid's published bytes
  // in a memory (live and orphaned; gRPC clients, whose uid is unknown,
  // share one allowance) stay within that memory's client_quota, beyond
  // which Publish is RESOURCE_EXHAUSTED. Publishing twice changes nothing.
  Status Publish(SessionRef session, uint64_t allocation);

  // The orphaned published allocations, for the operator.
  std::vector<OrphanReport> ListOrphans() const;

  Result<std::vector<AllocationListing>> ListAllocations(const SessionRef* only) const;

  // An allocation the session may use: its own or a published one.
  Result<AllocationReport> Lookup(SessionRef session, uint64_t allocation) const;

  // Lookup for a client that maps the allocation's memory itself (the
  // local socket's Map): its stores then reach the bytes without the
  // daemon. So another session gets no memory of a watched allocation
  // (`fd` -1, `watched`: it may still register instances on it and copy),
  // and an allocation another session has mapped can no longer be watched
  // (Watch: FAILED_PRECONDITION).
  Result<AllocationReport> Map(SessionRef session, uint64_t allocation);

  Status Write(SessionRef session, uint64_t allocation, uint64_t offset, std::string_view data);

  Result<std::string> Read(SessionRef session, uint64_t allocation, uint64_t offset,
                           uint64_t length) const;

 private:
  Node::Impl* impl_;
};

}  // namespace isometry::node
