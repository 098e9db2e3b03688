// Validation of one ring submission, as a pure function.
//
// The daemon copies a SubmissionEntry out of shared memory once (no double
// fetch) and hands the copy here; everything a client can write into an
// entry is checked before the entry reaches the node. Pure so that a fuzzer
// (fuzz/ring_entry_fuzzer.cc) and unit tests can call it without a daemon.
#pragma once

#include <cstdint>

#include "core/status.h"
#include "proto/ring_abi.h"

namespace isometry::ring {

// A submission whose fields are known to be well formed. Ids are not
// checked for existence here: the node answers NOT_FOUND / PERMISSION_DENIED.
struct ValidSubmission {
  Op op = Op::kNop;
  int32_t priority = 0;
  uint64_t src_instance = 0;      // kCopy
  uint64_t dst_instance = 0;      // kCopy
  bool client_runs_hops = false;  // kCopy: kFlagClientRunsHops
  bool durable = true;            // kCopy: without kFlagNoSync
  bool report_accepted = false;   // kCopy: kFlagReportAccepted
  uint64_t transfer = 0;          // kCancel
};

// INVALID_ARGUMENT for flags other than a kCopy's kFlagClientRunsHops,
// kFlagNoSync and kFlagReportAccepted, non-zero reserved bytes and an
// unknown op.
// The message fits a CompletionEntry's 104 bytes. The op is read as the
// integer it is: an out-of-range value never becomes an enum value.
Result<ValidSubmission> ValidateSubmission(const SubmissionEntry& e);

}  // namespace isometry::ring
