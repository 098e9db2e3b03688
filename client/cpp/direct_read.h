// Direct reads (README, "Direct reads"): the client side of a lease from
// isometryd to copy another process's published private range into this
// process's own private memory with this process's own process_vm_readv
// calls. The daemon checks the pair once and sends the copy program and a
// pidfd of the source; every later Copy() of the pair runs here, on the
// calling thread, with no daemon thread between the two processes
// (FALCON-X's receiver-side CMA zero-copy).
//
// The kernel checks this process's own right to read the source at every
// call; the pidfd proves after each batch that the pid still named the
// process that registered (procmem/cma_copy.h); the session's
// lease_epoch (proto/ring_abi.h) tells that the range may have ended.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>

#include "core/status.h"
#include "core/unique_fd.h"
#include "isometry.pb.h"
#include "layout/copy_program.h"

namespace isometry::client {

struct DirectLease {
  pid_t pid = 0;
  UniqueFd pidfd;
  uint64_t remote_address = 0;  // the program's source offset 0 in the source process
  std::byte* local = nullptr;   // its destination offset 0 here
  CopyProgram program;
  uint32_t epoch = 0;  // ControlHeader::lease_epoch at the grant
};

// The lease the daemon answered, checked before it is trusted with this
// process's memory: the program decodes, moves the bytes it says, reads
// inside [0, src_span) and writes inside [0, dst_span), and the
// destination [local_address, + dst_span) lies in [own_begin, own_end),
// the range this session registered. INTERNAL otherwise.
Result<std::shared_ptr<const DirectLease>> CheckedLease(const v1::DirectReadResponse& r,
                                                        UniqueFd pidfd, uint64_t own_begin,
                                                        uint64_t own_end);

// Runs one copy of the lease: one read of the source's extent and a local
// gather when the runs are many and small (procmem/cma_gather.h), else
// batches of runs. NOT_FOUND when the source process has exited,
// PERMISSION_DENIED when the kernel refuses this process the read.
Status RunDirectRead(const DirectLease& lease);

}  // namespace isometry::client
