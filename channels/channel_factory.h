// The one place that maps a channel config to an implementation, and says
// which kinds of channel this build and this machine offer. Build switches
// for optional backends (CUDA, ibverbs) live in channel_factory.cc's table
// and nowhere else; no caller chooses a backend by name.
//
// Thread safety: every function may be called from any thread; nothing here
// holds state between calls but the tests' registrations.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "channels/gpu_memory.h"
#include "config/runtime_config.h"
#include "core/channel_kind.h"

namespace isometry {

// The descriptor of every kind this tree knows (channel_backend.h), in
// ChannelKind order, then any a test registered (TestBackendRegistration).
// A kind this build lacks still has its descriptor, with a null `make`.
std::vector<const ChannelBackend*> ChannelBackends();

// The descriptor of `kind`; null for a value no descriptor claims.
const ChannelBackend* FindBackend(ChannelKind kind);

// What the planners know of an edge of `kind` (ChannelBackend::edge_traits):
// whoever makes a TopologyEdge or a NetworkLink of a kind sets it from
// here, for a peer's edges as for this node's. A kind no descriptor claims
// gets the defaults.
EdgeTraits EdgeTraitsOf(ChannelKind kind);

// The descriptor of the kind whose channels join this node to its peers
// (the one built-in kind made per peer: remote_memcpy). The cluster makes
// the joined graph's network links of it.
const ChannelBackend& NetworkBackend();

// Tests only: adds `backend` (which must outlive the registration) to the
// list while the object lives, so a toy channel can be made, probed and
// modelled like a real one (tests/unit/toy_channel_test.cc). Registration
// and lookups may race safely; a kind already listed is refused by a
// CHECK-style abort, since it would shadow a real backend.
class TestBackendRegistration {
 public:
  explicit TestBackendRegistration(const ChannelBackend& backend);
  ~TestBackendRegistration();
  TestBackendRegistration(const TestBackendRegistration&) = delete;
  TestBackendRegistration& operator=(const TestBackendRegistration&) = delete;

 private:
  const ChannelBackend* backend_;
};

// Probes what each kind of channel needs (a ring for the disk channels, a
// data plane for the network ones, GPU and RDMA devices) and reports every
// kind, available or not. Cheap enough to run once at start.
std::vector<ChannelAvailability> ProbeChannels(const ChannelContext& context);

// Logs ProbeChannels' findings, one line per kind.
void LogChannelAvailability(const std::vector<ChannelAvailability>& found);

// The GPUs this build and machine offer, in the config's terms (for
// ResolveGpus, config/gpu_config.h): device memory sizes and peer access
// from the probe (run once per process), or why there are none ("GPU
// channels absent from this build: ..."; "no GPU: CUDA driver version is
// insufficient ...").
GpuInventory DetectGpus();

// Device memory and host pinning for the GPUs DetectGpus found
// (channels/gpu_memory.h); an error saying why where there are none.
Result<std::shared_ptr<GpuMemory>> MakeGpuMemory();

// Makes the channel `config` describes: a working channel or an error that
// names the channel and the cause (a kind this build lacks, a missing data
// plane, a ring the kernel refuses).
Result<std::unique_ptr<Channel>> MakeChannel(const ChannelConfig& config,
                                             const ChannelContext& context = {});

}  // namespace isometry
