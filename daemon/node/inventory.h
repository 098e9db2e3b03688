// What the sessions hold, as the operator (or a session, of itself) sees
// it: isoctl sessions and isoctl allocations (node::Sessions::ListSessions,
// node::Pools::ListAllocations). Never a session's token.
#pragma once

#include <cstdint>
#include <string>

namespace isometry {

struct SessionListing {
  uint64_t id = 0;  // the public session number
  std::string client_name;
  int64_t uid = -1;  // -1: not known (gRPC)
  int64_t pid = -1;
  double age_s = 0;
  uint32_t allocations = 0;
  uint64_t allocated_bytes = 0;
  uint32_t instances = 0;
  uint32_t transfers_active = 0;
  uint32_t private_ranges = 0;
  uint32_t datatypes = 0;
};

struct AllocationListing {
  uint64_t id = 0;
  std::string memory;
  uint64_t bytes = 0;
  uint64_t owner = 0;  // session number; 0: published and its owner left
  std::string owner_name;
  int64_t owner_uid = -1;
  int64_t owner_pid = -1;
  bool published = false;
  bool watched = false;
  bool mapped_by_others = false;
};

}  // namespace isometry
