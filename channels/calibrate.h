// Measures a channel's throughput function tp(r) (Isometry §4.1): the
// throughput of back-to-back requests of size r, for r from 4 KiB to
// 64 MiB, within a time budget. The planner turns the samples into a
// monotonic throughput function.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "channels/channel.h"

namespace isometry {

struct RateSample {
  uint64_t request_bytes = 0;
  double bytes_per_s = 0;
};

// By curve name: a channel's name for its run-size curve (MeasureChannel,
// MeasureDiskChannel, the CMA model), ContiguousCurve(name) for a
// host-memory channel's plain copies (MeasureContiguous) and
// Fields8Curve(name) for its conversions of many fields, UnsyncedCurve(name)
// for a disk write channel's writes without their fdatasync. A file without
// the latter three (written before they existed) still loads; its edges
// then read the run-size curve for every hop.
using Calibration = std::map<std::string, std::vector<RateSample>>;

// "<channel>:contiguous".
std::string ContiguousCurve(const std::string& channel);
// "<channel>:fields8": conversions of 8 interleaved fields, small runs
// (MeasureChannel with fields = 8; TopologyEdge::tp_fields8).
std::string Fields8Curve(const std::string& channel);
// "<channel>:unsynced": a DiskWrite channel's writes timed before their
// fdatasync (DiskCurves::unsynced; TopologyEdge::tp_unsynced).
std::string UnsyncedCurve(const std::string& channel);

// "<channel>:pinned" / "<channel>:pageable": a GPUWrite or GPURead
// channel's run-size curve with ZCM / other host memory at its host end
// (MeasureGpuChannel); ContiguousCurve of it for plain copies.
std::string GpuHostCurve(const std::string& channel, bool pinned);

// ":node_copy": one sample, what the node's memory moves with every core
// copying at once (MeasureNodeCopy; TopologyEdge::node_copy_bps). Not a
// channel: channel names cannot start with ':' in practice, and no edge
// reads it as a curve.
inline constexpr const char* kNodeCopyCurve = ":node_copy";

// ":node_pipe": one sample, what two memcpy hops pipelined through the
// runtime's ring move (MeasureNodePipe; TopologyEdge::node_pipe_bps),
// the first writing the ring with cached stores; ":node_pipe_streamed" the
// same with streaming stores into the ring. The runtime writes rings the
// faster way (absent from older files: cached). Not channels either.
inline constexpr const char* kNodePipeCurve = ":node_pipe";
inline constexpr const char* kNodePipeStreamedCurve = ":node_pipe_streamed";

// The largest run the eight-field conversions are measured at: the
// planner's kFields8MaxRun (planner/topology.h), which the runtime checks
// equal at compile time.
inline constexpr uint64_t kCalibrationFields8MaxRun = 64;

// Sizes measured: powers of four from 4 KiB to 64 MiB for channels that
// move whole requests; for layout-converting channels (Memcpy), contiguous
// run sizes: powers of two from 1 to 64 bytes, then powers of eight to
// 64 MiB.
std::vector<uint64_t> CalibrationSizes(const ChannelCaps& caps);

// Runs requests of each size on `channel` between two scratch host areas,
// keeping up to caps().max_in_flight requests in flight, for about
// budget / sizes each (at least two requests per size). For a converting
// channel the size is the contiguous run inside a request: what bounds its
// speed on a layout conversion is the run (PREFIX of §4.2, in bytes), not
// the request, so each request is a 4 MiB two-field AOS->SOA conversion
// with runs of that size (see `fields` below). Every figure is memory-bound: consecutive
// requests walk through areas of CalibrationAreaBytes() each, so no request finds its data in the
// cache (one cached buffer reads several times what real copies reach:
// docs/benchmarks/design-measurements.md, "Calibration"). Allocating and faulting in the two areas
// costs time outside `budget`. Host-memory channels only. Other traffic on the channel lowers the
// figures. The size of each of MeasureChannel's source and destination areas: 4x the last-level
// cache (core/cpu_cache.h), at least 128 MiB (two slots of the largest request, also for a cache
// size of 0), at most 1 GiB; and at most an eighth of `memory_limit` (core/memory_limit.h; 16 MiB
// at least), so that the two areas stay within a quarter of what the daemon may use: a container's
// memory limit below the areas killed the daemon while it calibrated. Sizes that no longer fit
// twice are not measured.
uint64_t CalibrationAreaBytes(uint64_t llc_bytes, uint64_t memory_limit);
// This machine's and process's: CalibrationAreaBytes(LastLevelCacheBytes(),
// MemoryLimitBytes()).
uint64_t CalibrationAreaBytes();

// `fields` (at least 2) is the conversion's field count: each request
// interleaves that many fields of `run` bytes; every field pass reads the
// request's source again, so more fields are slower at the same run.
// Sizes above `max_run` are left out (no sample).
Result<std::vector<RateSample>> MeasureChannel(Channel& channel, std::chrono::milliseconds budget,
                                               uint64_t fields = 2, uint64_t max_run = UINT64_MAX);

// Sizes of plain (contiguous) copies MeasureContiguous measures: powers of
// four from 4 KiB to 64 MiB.
std::vector<uint64_t> ContiguousCalibrationSizes();

// Measures plain copies on a host-memory channel the way the runtime runs
// them: a copy of size s is a stream of requests of min(s, the channel's
// request size), all its threads busy (caps().max_in_flight in flight),
// written with non-temporal stores when s exceeds the last-level cache
// (the runtime's choice for a transfer's last hop, ChannelRequest::
// stream_stores), cycling through areas of CalibrationAreaBytes. One
// sample per size, a copy of s bytes at least once per sample; about
// `budget` in all plus the areas' set-up. The first size above the cache is
// timed even where the budget would extend the curve flat (within
// MeasureSizes' bound for such a size): streaming stores can move far more
// than cached ones, and a figure extended flat from below would predict a
// large hop at a fraction of its speed
// (docs/benchmarks/design-measurements.md, "Calibration"). What a hop that
// moves one contiguous run is predicted from (TopologyEdge::tp_contiguous): the
// run-size curve of MeasureChannel is of AOS->SOA conversions, whose large
// runs miss the parallelism and store path of a large plain copy.
Result<std::vector<RateSample>> MeasureContiguous(Channel& channel,
                                                  std::chrono::milliseconds budget);

// What the node's memory moves when every core copies at once: up to
// min(hardware threads, 32) threads, each copying its own buffer of
// 2 x last-level cache / threads (8 to 64 MiB) with memcpy, for about
// `budget`. One sample: the summed bytes per second, request_bytes the
// per-thread buffer. Memcpy hops of one node that run at the same time on
// separate channels share this (TopologyEdge::node_copy_bps): two 1-thread
// hops pipelined each run slower than either alone (figures:
// docs/benchmarks/design-measurements.md, "Calibration"). Fails only when the buffers
// cannot be allocated.
Result<RateSample> MeasureNodeCopy(std::chrono::milliseconds budget);

// What two memcpy hops of one node pipelined through a ring move: one
// thread copies `slot_bytes` at a time from a large source area into the
// next of `slots` ring slots, another from the filled slot into a large
// destination area, each waiting for the other at the ring's ends, for
// about `budget`. Both copy with the executor the memcpy channel runs
// (layout/executor.h): the second with streaming stores, as the runtime's
// last hop of a large copy writes; the first into the ring with cached
// stores, or with streaming ones where `stream_ring` (the runtime does
// whichever calibration found faster: Runtime's ring writes). One sample:
// bytes through the ring per second, request_bytes the slot. The
// runtime's ring for such a copy is slots_per_buffer chunks of the
// channel's request size; a ring that small stays in the cache, so the
// pair crosses memory about as often as one copy does, and runs well above
// node_copy_bps / 2 (TopologyEdge::node_pipe_bps; figures:
// docs/benchmarks/design-measurements.md, "Calibration"). The figure is the best of four windows of
// the steady state (a vCPU taken away for a while slows one window, not
// the hardware). Fails when the buffers cannot be allocated, and with
// UNAVAILABLE when the pipeline moved nothing in twice the budget (other
// work held the cores): never a rate of 0.
Result<RateSample> MeasureNodePipe(uint64_t slot_bytes, int slots, std::chrono::milliseconds budget,
                                   bool stream_ring = false);

// Measures a GPU channel (GPUWrite, GPURead, GPUCopy) between a host area
// of 128 MiB (pinned and mapped through `gpu` when `pinned`: a ZCM edge;
// pageable otherwise) or device memory and device memory of GPU `device`
// (128 MiB, allocated through `gpu`, freed before returning): plain copies
// by size as MeasureContiguous does (`contiguous`), and two-field AOS ->
// SOA conversions of 4 MiB by run size from 1 B to 64 KiB as
// MeasureChannel does (`runs`: where the copy engines' 2-D copies or the
// pack kernel pay per run). About `budget` in all. Errors: another kind
// of channel, memory the device or the host refuses, a failed request.
struct GpuCurves {
  std::vector<RateSample> runs;
  std::vector<RateSample> contiguous;
};
class GpuMemory;
Result<GpuCurves> MeasureGpuChannel(Channel& channel, GpuMemory& gpu, int device, bool pinned,
                                    std::chrono::milliseconds budget);

// Measures a DiskRead or DiskWrite channel: sequential back-to-back
// requests of each size (4 KiB to 64 MiB, powers of four) through a scratch
// file in `directory`, from or into huge-page host memory like the
// daemon's rings, consecutive requests at consecutive places of an area
// of CalibrationAreaBytes (so the host side is memory-bound too). The
// file is unlinked as soon as it is open, so nothing is left behind. A
// DiskRead calibration first writes a 128 MiB area
// (untimed: a sparse file would read without touching the device) and
// cycles through it. A DiskWrite calibration measures what a durable copy
// into a new file pays: each size writes into holes of a sparse 512 MiB
// file (its blocks dropped first) and its time includes the closing
// fdatasync. Costs up to about `budget` of I/O plus, for reads, the fill;
// a write needs up to about budget x device speed of free space, briefly.
// Fails with the path when the directory cannot take the file.
// `samples` is the curve a durable copy pays; for a DiskWrite channel
// `unsynced` has the same sizes timed up to the fdatasync (what a copy
// with durable = false pays), for a DiskRead channel it is empty.
struct DiskCurves {
  std::vector<RateSample> samples;
  std::vector<RateSample> unsynced;
};
Result<DiskCurves> MeasureDiskChannel(Channel& channel, const std::string& directory,
                                      std::chrono::milliseconds budget);

}  // namespace isometry
