// Keeps channel calibrations in the state directory, tagged with a
// hardware fingerprint, so a restart on the same machine reuses them and a
// different machine (or a changed channel config) measures again.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "channels/calibrate.h"
#include "config/runtime_config.h"

namespace isometry {

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

// CPU model, core count, memory size, each channel's config (kind,
// threads, in-flight limit, request size, rate cap) and each DSK memory's
// directory and device: what the figures depend on.
std::string HardwareFingerprint(const RuntimeConfig& config);

// Reads `path`; NotFound when absent, FailedPrecondition when it was made
// for another fingerprint, InvalidArgument when malformed.
Result<Calibration> LoadCalibration(const std::string& path, const std::string& fingerprint);
// Writes atomically (temporary file, then rename).
Status SaveCalibration(const std::string& path, const std::string& fingerprint,
                       const Calibration& calibration);

}  // namespace isometry
