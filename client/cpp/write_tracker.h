// Which pages this process stored into through its own mapping of a pool
// allocation, for incremental checkpoints (docs/guides/active-access.md, "Incremental
// checkpoints"). The daemon sees only the writes that pass through it
// (copies, active puts); a client's plain stores into its mapping bypass
// it, so the client tracks them itself and lists them with the checkpoint.
//
//   auto tracker = isometry::client::WriteTracker::Start(alloc);
//   if (!tracker.ok()) ... // the kernel cannot: checkpoint with full = true
//   ... stores into alloc.data() ...
//   aa.Checkpoint(alloc.id(), "dsk0", "table.img", {.tracker = tracker->get()});
//
// How: userfaultfd write-protect in asynchronous mode (Linux 6.7+:
// UFFD_FEATURE_WP_ASYNC on shmem) marks every page read-only in the page
// table; a store clears the mark in the kernel without a fault handler
// thread, and the PAGEMAP_SCAN ioctl lists the pages whose mark is gone and
// sets it again, in one call. Start probes all of it and fails with
// UNIMPLEMENTED (the kernel lacks a feature) or PERMISSION_DENIED
// (userfaultfd is not allowed: vm.unprivileged_userfaultfd = 0 without
// CAP_SYS_PTRACE, and no access to /dev/userfaultfd), naming what is
// missing.
//
// Limits: a page the kernel reclaims (swaps out) after a store and before
// the next Collect loses its mark with its page-table entry and may be
// missed; keep tracked allocations resident (mlock) or take a full
// checkpoint after memory pressure. Stores by other processes that mapped
// the allocation are theirs to track.
//
// Thread-safety: one tracker is used by one thread at a time; stores from
// any thread of this process are tracked. The tracker must not outlive
// the mapping it watches.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "core/status.h"
#include "core/unique_fd.h"

namespace isometry::client {

class WriteTracker {
 public:
  // [first page, page count), relative to the tracked range's start.
  using PageRange = std::pair<uint64_t, uint64_t>;

  // Whether this kernel and process can track writes (OK), or why not.
  static Status Supported();
  // Tracks stores into [data, data + bytes): page aligned, one shared
  // mapping of a memfd or shmem (a pool allocation's). Every page starts
  // clean.
  static Result<std::unique_ptr<WriteTracker>> Start(std::byte* data, uint64_t bytes);
  static Result<std::unique_ptr<WriteTracker>> Start(const Allocation& allocation) {
    return Start(allocation.data(), allocation.size());
  }
  ~WriteTracker();
  WriteTracker(const WriteTracker&) = delete;
  WriteTracker& operator=(const WriteTracker&) = delete;

  // The pages stored into since Start or the last Collect, marked clean
  // again as they are listed (a store racing with the scan lands in this
  // list or the next, never in neither).
  Result<std::vector<PageRange>> Collect();

 private:
  WriteTracker(UniqueFd uffd, UniqueFd pagemap, std::byte* data, uint64_t bytes)
      : uffd_(std::move(uffd)), pagemap_(std::move(pagemap)), data_(data), bytes_(bytes) {}
  const UniqueFd uffd_;
  const UniqueFd pagemap_;  // /proc/self/pagemap
  std::byte* const data_;
  const uint64_t bytes_;
};

}  // namespace isometry::client
