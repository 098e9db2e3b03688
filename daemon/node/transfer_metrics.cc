#include "daemon/node/transfer_metrics.h"

namespace isometry {

TransferMetrics::TransferMetrics() {
  for (auto& h : duration_) h = std::make_unique<Histogram>(kSecondsBounds);
}

size_t TransferMetrics::SizeClass(uint64_t bytes) {
  size_t i = 0;
  while (i < kSizeLimits.size() && bytes >= kSizeLimits[i]) ++i;
  return i;
}

void TransferMetrics::Record(const Status& status, uint64_t bytes, double elapsed_s, int64_t uid) {
  if (status.ok()) {
    duration_[SizeClass(bytes)]->Observe(elapsed_s);
    if (!bytes_by_uid_.contains(uid) && bytes_by_uid_.size() >= kMaxUids) uid = kOtherUids;
    bytes_by_uid_[uid] += bytes;
    return;
  }
  if (absl::IsCancelled(status)) return;  // asked for: not a failure
  const auto code = static_cast<size_t>(status.code());
  ++failed_[code < failed_.size() ? code : static_cast<size_t>(absl::StatusCode::kUnknown)];
}

EndedTransfers TransferMetrics::Snapshot() const {
  EndedTransfers e;
  for (const auto& h : duration_) e.duration.push_back(h->Counts());
  for (size_t code = 2; code < failed_.size(); ++code) {  // past OK and CANCELLED
    e.failed.emplace_back(static_cast<absl::StatusCode>(code), failed_[code]);
  }
  e.bytes_by_uid = bytes_by_uid_;
  return e;
}

}  // namespace isometry
