// A channel kind described by the folder that implements it: which memory
// pairs it serves, whether it converts layouts, the rate model the planner
// uses before calibration, how to calibrate, probe and make it. Each
// channel folder exports one (channels/<kind>/<kind>_channel.h) and
// channel_factory.cc lists them; the runtime, topology and calibration ask
// the descriptor of a kind (BackendOf, channel_factory.h) instead of
// switching on ChannelKind. Adding a channel: docs/development/adding-a-channel.md.
//
// A descriptor is plain data with function pointers: constant, shared by
// every channel of its kind, safe to read from any thread. A null function
// means the kind has no such step (no calibration: it keeps its model; no
// make: absent from this build).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "channels/calibrate.h"
#include "channels/channel.h"
#include "config/runtime_config.h"
#include "core/channel_kind.h"
#include "core/memory.h"

namespace isometry {

namespace net {
class DataPlane;
}
namespace rdma {
class NetRoutes;
}
class GpuMemory;

// What channels need beyond their config entry.
struct ChannelContext {
  // remote_memcpy channels move data over this node's data plane (the
  // links to its peers); null on a node without peers. Must outlive every
  // channel made with it.
  net::DataPlane* data_plane = nullptr;
  // Set where RDMA may carry network hops: each peer's network channel
  // then sends the copies routed over RDMA there (rdma/net_routes.h).
  std::shared_ptr<rdma::NetRoutes> rdma_routes;
};

// Whether this daemon can make channels of `kind`, and what the probe found
// or why not ("io_uring: sq=2 cq=4 ..."; "no RDMA device in
// /sys/class/infiniband").
struct ChannelAvailability {
  ChannelKind kind = ChannelKind::kMemcpy;
  bool available = false;
  std::string detail;
};

// A throughput model before calibration: tp(r) = r / (r / peak +
// per_request_seconds) (ThroughputFunction::PerRequestOverhead). A peak
// of 0 stands for the planner's placeholder for edges nobody measured
// (ThroughputFunction's default).
struct RateModel {
  double peak_bytes_per_s = 0;
  double per_request_seconds = 0;
};

// The model of one edge: its run-size curve (TopologyEdge::tp) and, where
// plain copies cost differently from a copy program's runs, the plain-copy
// curve (TopologyEdge::tp_contiguous).
struct EdgeRateModel {
  RateModel runs;
  std::optional<RateModel> contiguous;
};

// Where a channel sits, as calibration needs it; the runtime fills it from
// the edges the channel serves, without knowing the kind.
struct CalibrationSite {
  const RuntimeConfig* config = nullptr;
  // The directory of the first DSK memory an edge reaches; "" if none.
  std::string disk_directory;
  // Device memory and host pinning, where the node has a GPU; else null.
  GpuMemory* gpu = nullptr;
  // The device of the first FBM memory an edge reaches; -1 if none.
  int gpu_device = -1;
  // Whether an edge reaches ZCM (pinned) / SYS or REG (pageable) memory.
  bool pinned_host = false;
  bool pageable_host = false;
};

struct ChannelBackend {
  ChannelKind kind = ChannelKind::kMemcpy;
  // The kind's name in configs, logs and the wire (ChannelKindName).
  const char* name = "";
  // Whether a channel of this kind can move data from `src` to `dst`
  // memory (Isometry table 2); its default edges are the configured
  // memories' pairs it serves. PROCESS memory is never among them.
  bool (*serves)(MemoryKind src, MemoryKind dst) = nullptr;
  // What the planners need to know of its edges (planner/topology.h):
  // whether a hop on it may change the layout, whether the simple
  // algorithm converts on it, whether its hops share the node's memory
  // bandwidth, whether its curve is a per-run cost. Every edge of the
  // kind carries them (EdgeTraitsOf, channel_factory.h), a peer's too.
  EdgeTraits edge_traits;
  // Its edges are every client's PROCESS memory to and from every host
  // memory, none configured (cma).
  bool reaches_process_memory = false;
  // Its default edges join memories of one device (gpu_copy: peer access
  // between devices is the probe's to know, and ResolveGpus writes those
  // edges out).
  bool within_one_device = false;
  // The daemon makes its channels, one per peer, between no configured
  // memories (remote_memcpy): the config's edge checks pass it by.
  bool per_peer = false;
  // Its channels can be capped (ChannelConfig::rate_limit_bytes_per_s);
  // a written rate_limit on a kind that cannot is refused (cma: each
  // request is one system call the channel cannot pace).
  bool takes_rate_limit = true;
  // A calibration without a plain-copy curve for an edge keeps the
  // model's (files written before the kind's plain copies were measured).
  bool keeps_plain_model = false;
  // The model of an edge from `src` to `dst` before calibration.
  EdgeRateModel (*model)(MemoryKind src, MemoryKind dst) = nullptr;
  // Whether calibrating a channel at `site` spends a share of the budget.
  bool (*spends_budget)(const CalibrationSite& site) = nullptr;
  // Measures `channel` within about `budget` into `cal` (curve names:
  // calibrate.h). An error stops the calibration; a measurement that may
  // fail on some machines logs why and keeps the model instead.
  Status (*calibrate)(Channel& channel, const CalibrationSite& site,
                      std::chrono::milliseconds budget, Calibration& cal) = nullptr;
  // The curve an edge of the channel `name` between local memories of
  // kinds `src` and `dst` reads; null: `name` itself.
  std::string (*curve_of)(const std::string& name, MemoryKind src, MemoryKind dst) = nullptr;
  // A short description of a made channel for the start-up log; "" none.
  std::string (*describe)(const Channel& channel) = nullptr;
  ChannelAvailability (*probe)(ChannelKind kind, const ChannelContext& context) = nullptr;
  // Null: not in this build.
  Result<std::unique_ptr<Channel>> (*make)(const ChannelConfig& config,
                                           const ChannelContext& context) = nullptr;
};

// Helpers for descriptors' probes.
inline ChannelAvailability KindAvailable(ChannelKind kind, std::string detail) {
  return {kind, true, std::move(detail)};
}
inline ChannelAvailability KindAbsent(ChannelKind kind, std::string why) {
  return {kind, false, std::move(why)};
}

}  // namespace isometry
