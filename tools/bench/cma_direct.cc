#include "tools/bench/cma_direct.h"

#include <limits.h>

#include <algorithm>

#include "tools/bench/bench_fail.h"

namespace isometry::bench {

CmaDirect::CmaDirect(pid_t pid, uint64_t remote_address, const Datatype& send, int64_t count,
                     std::byte* local, const Datatype& recv, int64_t count_recv)
    : pid_(pid) {
  constexpr size_t kMaxRuns = size_t{1} << 20;
  const auto sent = Must(Segments(send, count, kMaxRuns), "send runs");
  const auto received = Must(Segments(recv, count_recv, kMaxRuns), "receive runs");
  // The peer's address, only handed to the kernel.
  auto* remote = reinterpret_cast<std::byte*>(remote_address);  // NOLINT(performance-no-int-to-ptr)
  size_t i = 0, j = 0;
  int64_t in_i = 0, in_j = 0;  // bytes of sent[i] / received[j] already placed
  Batch b;
  while (i < sent.size() && j < received.size()) {
    const Segment& a = sent[i];
    const Segment& d = received[j];
    if (a.offset < 0 || d.offset < 0) {
      Die("the CMA limit row needs runs at non-negative offsets");
    }
    const int64_t n = std::min(a.length - in_i, d.length - in_j);
    b.remote.push_back({remote + a.offset + in_i, static_cast<size_t>(n)});
    b.local.push_back({local + d.offset + in_j, static_cast<size_t>(n)});
    b.bytes += n;
    in_i += n;
    in_j += n;
    if (in_i == a.length) ++i, in_i = 0;
    if (in_j == d.length) ++j, in_j = 0;
    if (b.local.size() == IOV_MAX) {
      batches_.push_back(std::move(b));
      b = Batch();
    }
  }
  if (!b.local.empty()) batches_.push_back(std::move(b));
}

void CmaDirect::Copy() const {
  for (const Batch& b : batches_) {
    if (process_vm_readv(pid_, b.local.data(), b.local.size(), b.remote.data(), b.remote.size(),
                         0) != b.bytes) {
      Die("process_vm_readv of the peer's runs failed");
    }
  }
}

}  // namespace isometry::bench
