// Internal to daemon/cluster: the initiator's view of a cross-node copy.
// Methods in cross_copy.cc.
#pragma once

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "daemon/cluster/cluster_impl.h"

namespace isometry::cluster {

class CrossOp final : public CrossTransfer, public std::enable_shared_from_this<CrossOp> {
 public:
  CrossOp(Cluster::Impl* impl, uint64_t key, std::string path, uint64_t bytes,
          double predicted_bytes_per_s, std::function<void(Status)> done)
      : impl_(impl),
        key_(key),
        bytes_(bytes),
        path_(std::move(path)),
        predicted_(predicted_bytes_per_s),
        done_(std::move(done)) {}

  void Cancel() override;
  void Abort(const Status& why) override { Fail(why); }
  std::string PathText() const override {
    absl::MutexLock lock(&mu_);
    return path_;
  }
  uint64_t bytes() const override { return bytes_; }
  Clock::time_point started() const override { return started_; }
  double predicted_bytes_per_s() const override {
    absl::MutexLock lock(&mu_);
    return predicted_;
  }
  // Planned again before any half started.
  void Replanned(std::string path, double predicted_bytes_per_s) {
    absl::MutexLock lock(&mu_);
    path_ = std::move(path);
    predicted_ = predicted_bytes_per_s;
  }

  uint64_t key() const { return key_; }
  // A half is being set up (counted until HalfDone).
  void AddHalf(const std::string& node) {
    absl::MutexLock lock(&mu_);
    ++pending_;
    nodes_.push_back(node);
  }
  void SetLocal(const Transfer& t) {
    Status failed;
    {
      absl::MutexLock lock(&mu_);
      local_ = t;
      failed = failure_;
    }
    if (!failed.ok()) t.Abort(failed);  // the copy failed while this half started
  }
  void AddAwait(const std::string& node, std::shared_ptr<grpc::ClientContext> ctx) {
    absl::MutexLock lock(&mu_);
    awaits_.emplace_back(node, std::move(ctx));
  }
  // A half ended with `s`; `lands`: it holds the destination's end (the
  // receiving half, or a forwarded copy's only one), so its success means
  // every byte landed and the copy is done, whatever ends the others.
  void HalfDone(const Status& s, bool lands = false);
  void Finish(const std::function<void(Status)>& done, Status final);
  // Set-up is over (every half it started was counted): the copy ends when
  // the last of them has, or now when none runs.
  void SetUpDone();
  void Fail(const Status& why);  // ends every half with `why`
  bool Involves(const std::string& node) const {
    absl::MutexLock lock(&mu_);
    return std::find(nodes_.begin(), nodes_.end(), node) != nodes_.end();
  }
  bool failed() const {
    absl::MutexLock lock(&mu_);
    return !failure_.ok();
  }

 private:
  Cluster::Impl* const impl_;
  const uint64_t key_;
  const uint64_t bytes_;
  const Clock::time_point started_ = Clock::now();
  mutable absl::Mutex mu_;
  std::string path_ ABSL_GUARDED_BY(mu_);
  double predicted_ ABSL_GUARDED_BY(mu_);  // bytes/s; 0: no estimate
  std::function<void(Status)> done_ ABSL_GUARDED_BY(mu_);
  int pending_ ABSL_GUARDED_BY(mu_) = 0;
  bool setup_done_ ABSL_GUARDED_BY(mu_) = false;
  Status failure_ ABSL_GUARDED_BY(mu_);
  // The destination's half ended well: a cancel or failure after that
  // changes nothing (the copy is reported done, never cancelled).
  bool landed_ ABSL_GUARDED_BY(mu_) = false;
  std::optional<Transfer> local_ ABSL_GUARDED_BY(mu_);
  // Nodes running remote halves ("" = here).
  std::vector<std::string> nodes_ ABSL_GUARDED_BY(mu_);
  std::vector<std::pair<std::string, std::shared_ptr<grpc::ClientContext>>> awaits_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry::cluster
