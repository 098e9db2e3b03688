// One ring submission as a client may write it into shared memory: any 64
// bytes. The daemon copies the entry out once and validates the copy with
// ring::ValidateSubmission; an accepted entry must be well formed.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "proto/ring_validate.h"

using namespace isometry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ring::SubmissionEntry e;
  std::memset(&e, 0, sizeof e);
  std::memcpy(&e, data, size < sizeof e ? size : sizeof e);
  const Result<ring::ValidSubmission> v = ring::ValidateSubmission(e);
  if (!v.ok()) {
    if (v.status().code() != absl::StatusCode::kInvalidArgument) {
      std::abort();
    }
    if (v.status().message().size() > sizeof(ring::CompletionEntry::message)) {
      std::abort();
    }
    return 0;
  }
  // Flags: none, or on a copy its promise to run its own hops, its asking
  // to skip the DSK sync and to be told its id at acceptance, each
  // reported back.
  const uint16_t allowed =
      e.op == static_cast<uint16_t>(ring::Op::kCopy)
          ? ring::kFlagClientRunsHops | ring::kFlagNoSync | ring::kFlagReportAccepted
          : 0;
  if ((e.flags & ~allowed) != 0 || e.op > static_cast<uint16_t>(ring::Op::kCancel)) {
    std::abort();
  }
  if (v->client_runs_hops != ((e.flags & ring::kFlagClientRunsHops) != 0)) {
    std::abort();
  }
  if (v->durable != ((e.flags & ring::kFlagNoSync) == 0)) {
    std::abort();
  }
  if (v->report_accepted != ((e.flags & ring::kFlagReportAccepted) != 0)) {
    std::abort();
  }
  for (uint8_t b : e.reserved) {
    if (b != 0) {
      std::abort();
    }
  }
  if (static_cast<uint16_t>(v->op) != e.op || v->priority != e.priority) {
    std::abort();
  }
  return 0;
}
