#include "proto/ring_validate.h"

namespace isometry::ring {

Result<ValidSubmission> ValidateSubmission(const SubmissionEntry& e) {
  const bool copy = e.op == static_cast<uint16_t>(Op::kCopy);
  const uint16_t allowed = copy ? kFlagClientRunsHops | kFlagNoSync | kFlagReportAccepted : 0;
  bool reserved_zero = (e.flags & ~allowed) == 0;
  for (uint8_t b : e.reserved) reserved_zero &= b == 0;
  if (!reserved_zero) {
    return InvalidArgument("submission has non-zero flags or reserved bytes");
  }
  ValidSubmission v;
  v.priority = e.priority;
  switch (e.op) {
    case static_cast<uint16_t>(Op::kNop):
      v.op = Op::kNop;
      return v;
    case static_cast<uint16_t>(Op::kCopy):
      v.op = Op::kCopy;
      v.src_instance = e.src_instance;
      v.dst_instance = e.dst_instance;
      v.client_runs_hops = (e.flags & kFlagClientRunsHops) != 0;
      v.durable = (e.flags & kFlagNoSync) == 0;
      v.report_accepted = (e.flags & kFlagReportAccepted) != 0;
      return v;
    case static_cast<uint16_t>(Op::kCancel):
      v.op = Op::kCancel;
      v.transfer = e.transfer;
      return v;
  }
  return InvalidArgument("unknown ring op ", e.op);
}

}  // namespace isometry::ring
