// The two processes of a direct or served read test: a daemon with the
// datatype channels, a worker process whose `bytes` of patterned memory
// are published, and a client of this process with as much of its own
// memory registered.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/datatype_oracle.h"
#include "integration/worker_process.h"

namespace isometry::testing {

struct ReadPair {
  // The worker's memory is Pattern(bytes, seed), ours Pattern(bytes, seed + 1).
  ReadPair(uint64_t bytes, uint64_t seed, const std::string& client_name)
      : d(kDatatypeChannels),
        other(d, bytes, seed),
        c(ConnectTo(d.local_socket(), client_name)),
        mine(RegisterMine(*c, bytes, seed + 1)),
        other0(AsBytes(other.before())) {}

  Daemon d;
  Worker other;
  std::unique_ptr<client::Client> c;
  Mine mine;
  std::vector<uint8_t> other0;  // the worker's bytes at the start
};

}  // namespace isometry::testing
