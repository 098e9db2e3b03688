// The memory pairs each configured channel serves, as its kind's
// descriptor says (ChannelBackend::serves and friends), and the checks of
// a config that need them. The config sits below the channels and knows
// no kind: it checks what the file alone decides (names, numbers, written
// edges naming known memories); what a kind allows (which edges it can
// serve, whether it takes edges or a rate limit at all), and whether two
// channels serve the same edge, is asked here. The daemon's
// start check (daemon/start_check.h) and Runtime::Create run both.
//
// Pure: reads the config and the constant descriptors; any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "config/runtime_config.h"
#include "core/status.h"

namespace isometry {

// The memory pairs channel `c` serves, by name: its written `edges`, or
// its kind's default (every configured pair the descriptor serves, within
// one device where it says so). A kind that reaches PROCESS memory (cma)
// serves every client's process memory to and from every host memory,
// whatever is written; no other kind ever reaches PROCESS memory.
std::vector<std::pair<std::string, std::string>> ChannelEdges(const RuntimeConfig& config,
                                                              const ChannelConfig& c);

// Whether any channel of `config` is of a kind that reaches clients'
// PROCESS memory (a cma channel): then the runtime adds that memory, and
// the daemon needs ptrace rights to reach other users' clients.
bool ReachesProcessMemory(const RuntimeConfig& config);

// What each written channel's kind allows: a kind made per peer is not
// written (the daemon makes those, PeerChannels), a kind that reaches
// PROCESS memory takes no edges, one that cannot be capped no rate_limit;
// every local channel's edges are of the kinds it moves between, and each
// edge is served by one channel alone. Errors name their key
// (channel[1].edges[0], or channel[1].kind for a default edge), for
// ConfigOrigin::Locate. Expects `config.Validate()` to have passed.
Status CheckChannelKinds(const RuntimeConfig& config);

}  // namespace isometry
