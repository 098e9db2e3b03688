// Direct reads (docs/guides/client-memory.md, "Direct reads"): the client side of a lease from
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

#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "client/cpp/served_read.h"
#include "client/cpp/timed_choice.h"
#include "core/status.h"
#include "core/unique_fd.h"
#include "isometry.pb.h"
#include "layout/copy_program.h"
#include "procmem/cma_copy.h"

namespace isometry::client {

// Leases of at most this many runs and under kTimedReadBytes time both
// ways of reading (ReadWays): at up to a microsecond a run in the kernel,
// a copy that tries the slower way costs tens of microseconds at most,
// and such tries are kept to about one copy's time in kReadExplore.
// Larger copies amortize the serve window's hand-offs, and their tries of
// the kernel's way cost more than they found
// (docs/benchmarks/design-measurements.md, "Direct and served reads").
inline constexpr uint64_t kTimedReadRuns = 64;
inline constexpr uint64_t kTimedReadBytes = uint64_t{1} << 20;
// Once both ways are known, one copy in this many (times the ratio of
// their costs) reads the slower way, to see a change of the machine.
inline constexpr uint32_t kReadExplore = 32;

struct DirectLease {
  pid_t pid = 0;
  UniqueFd pidfd;
  uint64_t remote_address = 0;  // the program's source offset 0 in the source process
  std::byte* local = nullptr;   // its destination offset 0 here
  CopyProgram program;
  uint32_t epoch = 0;  // ControlHeader::lease_epoch at the grant
  // How each copy runs, decided once: one read of the source's extent and
  // a local gather (many small runs), or the program's iovec batches,
  // built here once (memoized translation) when it has at most
  // kMaxMemoRuns runs, else walked at every copy.
  bool gather = false;
  std::optional<CmaBatches> batches;
  // A gathered copy of kSplitBytes of extent and more, cut in two
  // (SplitProgram): each thread reads and gathers its own half.
  std::vector<CopyProgram> halves;
  // Served reads (client/cpp/served_read.h): the source's publisher packs
  // each copy in its own process. Null when it serves none (or this
  // process could not attach to its window).
  std::shared_ptr<ServedWindow> served_window;
  std::unique_ptr<ServedProgram> served;
  // A staged lease (DirectReadResponse.unpack_programs): `program` packs
  // into a stream, not into this process's memory, so it runs only through
  // the serve window; a copy that cannot goes through the daemon.
  bool staged = false;
  // A served lease of at most kTimedReadRuns runs and under
  // kTimedReadBytes is read both ways and keeps the faster by timing its
  // copies (timed_choice.h; way 0 served, 1 the kernel's): a few runs
  // cost the kernel little, and the kernel's way skips the serve window's
  // hand-offs between the two processes, which weigh most in a small
  // copy. Null: served whenever it can run.
  struct ReadWays {
    std::mutex mu;
    TimedChoice choice{kReadExplore, /*scaled=*/true};  // guarded by mu
  };
  std::unique_ptr<ReadWays> ways;
};

// Runs over which a lease walks its program at every copy instead of
// keeping its iovecs (16 bytes a side a run).
inline constexpr uint64_t kMaxMemoRuns = uint64_t{1} << 18;
// Copies of at least this many bytes are shared with a helper thread
// (ClientOptions::direct_read_threads): two cores move memory faster than
// one (the source process, unlike MPI's sender, does nothing).
inline constexpr uint64_t kSplitBytes = uint64_t{1} << 20;
// ...and, read run by run, runs of at least this many bytes on average:
// with two threads pinning small runs of one process at once the kernel
// runs slower than one thread alone, and faster with large runs
// (docs/benchmarks/design-measurements.md, "Direct and served reads").
inline constexpr uint64_t kSplitMinRun = uint64_t{32} << 10;

// One helper thread that runs half of a large direct read while the
// calling thread runs the other half. Started at its first use; one copy
// at a time (a copy that finds it busy runs alone).
class DirectHelper {
 public:
  DirectHelper() = default;
  ~DirectHelper();
  DirectHelper(const DirectHelper&) = delete;
  DirectHelper& operator=(const DirectHelper&) = delete;
  // Runs work(1) on the helper and work(0) here; the first error of the
  // two. Nullopt when the helper is busy with another copy.
  std::optional<Status> Split(const std::function<Status(size_t)>& work);

 private:
  void Loop();
  std::mutex use_;  // one Split at a time
  std::mutex mu_;
  std::condition_variable cv_;
  const std::function<Status(size_t)>* job_ = nullptr;  // guarded by mu_
  std::optional<Status> done_;                          // guarded by mu_
  bool stop_ = false;                                   // guarded by mu_
  std::thread thread_;
};

// The lease the daemon answered, checked before it is trusted with this
// process's memory: the program decodes, moves the bytes it says, reads
// inside [0, src_span) and writes inside [0, dst_span), and the
// destination [local_address, + dst_span) lies in [own_begin, own_end),
// the range this session registered. INTERNAL otherwise.
// `window`: the source publisher's serve window, attached (may be null).
Result<std::shared_ptr<const DirectLease>> CheckedLease(const v1::DirectReadResponse& r,
                                                        UniqueFd pidfd, uint64_t own_begin,
                                                        uint64_t own_end,
                                                        std::shared_ptr<ServedWindow> window);

// Runs one copy of the lease: one read of the source's extent and a local
// gather when the runs are many and small (procmem/cma_gather.h), else
// batches of runs. NOT_FOUND when the source process has exited,
// PERMISSION_DENIED when the kernel refuses this process the read.
// `helper` (may be null) takes half of a copy of kSplitBytes and more.
// A lease with a serve window copies through it first (`spin_us`: how long
// to spin on a piece), and reads the kernel's way when it cannot.
// A staged lease's copy the publisher did not serve: UNAVAILABLE, and the
// caller copies through the daemon.
Status RunDirectRead(const DirectLease& lease, DirectHelper* helper, uint32_t spin_us);

}  // namespace isometry::client
