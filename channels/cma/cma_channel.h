// The CMA channel: another process's memory on this node (PROCESS, a
// ProcessBytes endpoint) to or from this process's host memory (SYS, REG,
// ZCM: a pool allocation or an intermediate buffer's slot, a HostBytes
// endpoint), with process_vm_readv when the other process is the source
// and process_vm_writev when it is the destination. It executes any copy
// program, one iovec per run (cma_copy.h), so its cost grows with the
// number of runs: ~per-iovec overhead + bytes / bandwidth
// (MeasureCmaCost below).
//
// Contract (beyond channel.h):
//  - A ProcessBytes endpoint must carry the pidfd its process was
//    registered with (ClientProcess, client_process.h: the identity check
//    is the caller's, done once at registration); the caller keeps the
//    pidfd open until `done` runs. Without one: FAILED_PRECONDITION.
//  - Both ends in other processes: FAILED_PRECONDITION (the planner goes
//    through a staging slot); both in this process: the same (a memcpy
//    channel's job).
//  - A process that exits or is killed mid-request fails that request
//    with NOT_FOUND ("process N has exited"); an unmapped range with
//    INVALID_ARGUMENT naming the address and length. Bytes before the
//    failure may have been moved. The channel keeps serving.
//  - `cancelled` is honoured between batches (at most
//    CmaLimits::batch_bytes, 4 MiB, or 1024 runs apart).
//  - Requests run in submission order on config.threads threads; the DMA
//    worker orders them by priority before they get here, like memcpy.
#pragma once

#include <memory>

#include "channels/channel.h"
#include "channels/channel_backend.h"
#include "config/runtime_config.h"

namespace isometry {

// Starts `config.threads` worker threads. Fails on a config that is not a
// cma channel, or one with a rate cap (not supported).
Result<std::unique_ptr<Channel>> MakeCmaChannel(const ChannelConfig& config);

// Whether process_vm_readv and pidfd_open work for this process here (a
// seccomp filter, a kernel without CONFIG_CROSS_MEMORY_ATTACH or before
// 5.3 refuses them): reads a few bytes of itself; and that Yama's
// ptrace_scope is not 3 (which refuses every other process, even with
// CAP_SYS_PTRACE). OK, or the reason.
Status ProbeCma();

// kernel.yama.ptrace_scope (0-3), or -1 without Yama.
int YamaPtraceScope();

// The planner's cost model of CMA: moving B bytes in R runs costs about
// R * per_iovec_seconds + B / bytes_per_second.
struct CmaCost {
  double per_iovec_seconds = 0;
  double bytes_per_second = 0;
};

// Measures CmaCost on this machine (a fraction of a second and a few MiB
// of scratch memory; figures: docs/benchmarks/design-measurements.md,
// "CMA channel"): reads of this process's own memory the way the channel reads a
// client, one preadv of /proc/self/mem per run, 1 MiB each time in runs of
// 64 B to 64 KiB (a least-squares line through time vs run count) and as
// one run. The 1 MiB is cache-resident, so bytes_per_second is the
// in-cache rate (an upper bound); per_iovec_seconds is the cost of one
// run, a system call each.
Result<CmaCost> MeasureCmaCost();

// The cma kind's descriptor (channel_backend.h).
const ChannelBackend& CmaBackend();

}  // namespace isometry
