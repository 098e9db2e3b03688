// The GPU channels (Isometry §3.2): GPUWrite (host memory to a GPU),
// GPURead (a GPU to host memory) and GPUCopy (within a GPU, or between two
// GPUs where peer access is enabled), executing any copy program
// (cuda_lowering.h: copy engines where they can express it, the pack
// kernel otherwise).
//
// Endpoints: a GPU side is DeviceBytes (a device pointer and its device
// number), a host side HostBytes. Pageable host memory works but makes the
// copy synchronous for the channel's thread; pinned (ZCM) memory does not.
// Any other pair fails the request with FAILED_PRECONDITION.
//
// Threading: each channel owns caps().max_in_flight streams per GPU and one
// thread. Submit() queues the request (highest ChannelRequest::priority
// first, then in submission order) and returns; the thread lowers and
// enqueues requests while fewer than max_in_flight run, and calls `done`
// once the stream reaches a host callback enqueued after the request's
// copies (cudaStreamAddCallback, which also reports a failed device),
// never inside Submit(). A request waiting in
// the queue when its `cancelled` flag is set completes with CANCELLED; one
// on a stream runs to the end. The destructor runs every queued request and
// waits for the streams.
//
// A cap (ChannelConfig::rate_limit_bytes_per_s) paces the requests: each is
// issued no sooner than the end of the time the one before it booked.
//
// A failed CUDA call fails its request with INTERNAL naming the call and
// CUDA's words; an error that poisons the device (a kernel fault) fails
// every later request too, as CUDA does.
#pragma once

#include <memory>

#include "channels/channel.h"
#include "channels/cuda/cuda_probe.h"
#include "config/runtime_config.h"

namespace isometry::cuda {

// A working channel of kind gpu_read, gpu_write or gpu_copy on the GPUs
// `probe` found, or an error naming the channel: another kind, no GPU
// (with the probe's reason), a stream CUDA refused.
Result<std::unique_ptr<Channel>> MakeCudaChannel(const ChannelConfig& config,
                                                 const GpuProbe& probe);

}  // namespace isometry::cuda
