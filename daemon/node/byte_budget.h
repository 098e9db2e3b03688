// A bound on memory that clients make the daemon hold on their behalf and
// that no pool accounts for: watch scratch buffers (a put's bytes waiting
// for its watch), registered datatypes. One budget per session and one for
// the node; a charge is taken against several at once and gives its bytes
// back to all of them when its last owner lets go.
//
// Thread-safety: every call may come from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/status.h"
#include "core/strings.h"

namespace isometry {

class ByteBudget {
 public:
  // `name` is the config key that sets `limit` (for messages).
  ByteBudget(std::string name, uint64_t limit) : name_(std::move(name)), limit_(limit) {}

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }

  // `bytes` of `what` charged to every budget in `budgets` (null ones are
  // skipped), or RESOURCE_EXHAUSTED naming the first without room (and
  // nothing charged). The returned object gives the bytes back when it is
  // destroyed; it keeps the budgets alive until then.
  static Result<std::shared_ptr<void>> Take(std::vector<std::shared_ptr<ByteBudget>> budgets,
                                            uint64_t bytes, const std::string& what) {
    for (size_t i = 0; i < budgets.size(); ++i) {
      if (!budgets[i] || budgets[i]->TryTake(bytes)) continue;
      const ByteBudget& full = *budgets[i];
      for (size_t j = 0; j < i; ++j) {
        if (budgets[j]) budgets[j]->Give(bytes);
      }
      return ResourceExhausted(what, " needs ", bytes, " bytes: ", full.used(), " of ",
                               full.limit(), " are held (", full.name_, ")");
    }
    return std::shared_ptr<void>(nullptr, [budgets = std::move(budgets), bytes](void*) {
      for (const auto& b : budgets) {
        if (b) b->Give(bytes);
      }
    });
  }

 private:
  bool TryTake(uint64_t bytes) {
    uint64_t cur = used_.load();
    do {
      if (bytes > limit_ || cur > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(cur, cur + bytes));
    return true;
  }
  void Give(uint64_t bytes) { used_.fetch_sub(bytes); }

  const std::string name_;
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace isometry
