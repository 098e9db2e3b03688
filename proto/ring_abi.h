// Shared-memory ring ABI between isometryd and local clients (version 1).
//
// After the handshake (isometry.proto, HelloRequest/HelloResponse) a client
// maps the control segment memfd. It holds this header, then `sq_entries`
// SubmissionEntry at sq_offset and `cq_entries` CompletionEntry at
// cq_offset. Both rings are single-producer single-consumer with free-running
// 32-bit indexes (slot = index & (entries - 1)):
//   SQ: the client writes entries and advances sq_tail, then writes 1 to
//       the submission eventfd unless daemon_awake is 1; the daemon
//       advances sq_head.
//   CQ: the daemon writes entries and advances cq_tail, then writes 1 to
//       the completion eventfd unless client_spinning is 1; the client
//       advances cq_head.
// The daemon copies each submission out of shared memory once and validates
// the copy; a malformed entry gets a completion with an error, never a crash.
// The CQ never overflows: the daemon takes a submission only while
// (completions owed - cq_head) < cq_entries, so completions owed always
// have a slot (an interim completion, kFlagReportAccepted, is owed only
// once the daemon found it a slot). A client that consumed completions
// while submissions were left waiting writes the submission eventfd again
// so the daemon resumes.
#pragma once

#include <cstdint>

#include "core/shm_ring.h"

namespace isometry::ring {

inline constexpr uint32_t kAbiVersion = 2;
inline constexpr uint32_t kMagic = 0x52534f49;  // "ISOR"

enum class Op : uint16_t {
  kNop = 0,     // completes at once with OK (a ping)
  kCopy = 1,    // copy src_instance -> dst_instance (whole source index space)
  kCancel = 2,  // cancel `transfer`; completes when the request is taken
};

// SubmissionEntry::flags of a kCopy: the client will run the hops of
// this copy that touch its own private memory through its hop window
// (layout/hop_window.h), because a thread of it waits for this copy and
// runs posted work meanwhile (Client::Copy does). A client that sets it
// and does not run them fails its own copy after daemon.own_hop_timeout_ms.
inline constexpr uint16_t kFlagClientRunsHops = 1;
// SubmissionEntry::flags of a kCopy: a DSK destination is not fdatasync'ed
// before it replaces its target (CopyOptions::durable false; the rename
// still makes it all-or-nothing). A daemon older than the flag refuses the
// entry ("non-zero flags").
inline constexpr uint16_t kFlagNoSync = 2;
// SubmissionEntry::flags of a kCopy: once the daemon has accepted the copy
// it posts an interim completion (code kCodeAccepted, `transfer` the
// copy's id), before the copy's own completion: the id to cancel or
// inspect it by while it runs. A CQ with no slot free for it then leaves
// it out (the copy's own completion still names the transfer), so it never
// holds a submission back. A daemon older than the flag refuses the entry.
inline constexpr uint16_t kFlagReportAccepted = 4;
// CompletionEntry::code of the interim completion kFlagReportAccepted asks
// for: not a google.rpc.Code, and never the copy's last word.
inline constexpr int32_t kCodeAccepted = -1;

struct SubmissionEntry {
  uint16_t op;
  uint16_t flags;  // kCopy: kFlagClientRunsHops, kFlagNoSync, kFlagReportAccepted; others: 0
  int32_t priority;
  uint64_t user_data;  // echoed in the completion
  uint64_t src_instance;
  uint64_t dst_instance;
  uint64_t transfer;     // kCancel
  uint8_t reserved[24];  // must be 0
};
static_assert(sizeof(SubmissionEntry) == 64);

struct CompletionEntry {
  uint64_t user_data;
  uint64_t transfer;  // id given to the copy (0 when rejected)
  int32_t code;       // google.rpc.Code, 0 = OK; or kCodeAccepted
  uint32_t message_len;
  char message[104];  // why it failed, truncated, not NUL-terminated
};
static_assert(sizeof(CompletionEntry) == 128);

// Each index alone on its cache line (core/shm_ring.h moves entries).
using PaddedIndex = shm::SharedIndex<uint32_t>;

struct ControlHeader {
  uint32_t magic;
  uint32_t abi_version;
  uint32_t sq_entries;
  uint32_t cq_entries;
  uint64_t sq_offset;
  uint64_t cq_offset;
  PaddedIndex sq_head;  // daemon-owned
  PaddedIndex sq_tail;  // client-owned
  PaddedIndex cq_head;  // client-owned
  PaddedIndex cq_tail;  // daemon-owned
  // 1 while the daemon is polling the SQ (it just served requests): a
  // client that publishes sq_tail and then reads 1 here may skip the
  // eventfd write. Both sides use sequentially consistent accesses (tail
  // store, then awake load; awake store, then tail load), so a submission
  // is never missed.
  PaddedIndex daemon_awake;
  // The same handshake the other way: 1 while a client thread spins on
  // cq_tail waiting for a completion, so the daemon may skip the
  // completion eventfd (a syscall on its side, a read on the client's).
  // The client stores 0 before it sleeps on the eventfd and then reads
  // cq_tail once more; the daemon stores cq_tail and then reads this flag
  // (all sequentially consistent), so a completion is never slept
  // through. A client that never sets it gets the eventfd every time.
  PaddedIndex client_spinning;
  // Direct reads (docs/guides/client-memory.md, "Direct reads"): the daemon adds one whenever a
  // private range this session holds a lease on ends. A lease carries the
  // value at its grant; the client compares after each read, and a change
  // means the read may have raced the range's end: it drops its leases and
  // copies through the daemon instead. Written only by the daemon (a
  // client that writes it only loses its own leases).
  PaddedIndex lease_epoch;
};

inline uint64_t ControlBytes(uint32_t sq_entries, uint32_t cq_entries) {
  return sizeof(ControlHeader) + uint64_t{sq_entries} * sizeof(SubmissionEntry) +
         uint64_t{cq_entries} * sizeof(CompletionEntry);
}

}  // namespace isometry::ring
