#include "daemon/server/translate_pool.h"

#include <absl/synchronization/mutex.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <deque>
#include <map>
#include <system_error>
#include <thread>
#include <vector>

#include "core/datatype.h"
#include "core/thread_name.h"
#include "daemon/server/task_limit.h"

namespace isometry {
namespace {

class Pool final : public TranslatePool {
 public:
  explicit Pool(const Limits& limits) : limits_(limits) {}

  ~Pool() override { Shutdown(); }

  void Shutdown() override {
    std::vector<std::thread> threads;
    std::deque<Item> left;
    {
      absl::MutexLock lock(&mu_);
      stopping_ = true;
      threads.swap(threads_);
      left.swap(queue_);
    }
    for (std::thread& t : threads) t.join();
    for (Item& item : left) {
      if (Answer answer = item.work(Unavailable("the daemon is shutting down"))) answer();
    }
  }

  Status Submit(const std::string& caller, std::string_view what, Work work) override {
    absl::MutexLock lock(&mu_);
    if (stopping_) return Unavailable("the daemon is shutting down");
    uint32_t& mine = per_caller_[caller];
    if (mine >= limits_.per_caller) {
      return ResourceExhausted(
          what, ": ", caller.empty() ? "the session-less callers have " : "this session has ", mine,
          " datatype translations queued or running; "
          "daemon.max_translates_per_session is ",
          limits_.per_caller,
          caller.empty() ? " (send a session to have a share of your own)" : "");
    }
    if (queue_.size() >= limits_.queue) {
      if (mine == 0) per_caller_.erase(caller);
      return ResourceExhausted(what, ": ", queue_.size(),
                               " datatype translations are waiting; daemon.translate_queue is ",
                               limits_.queue);
    }
    if (idle_ == 0 && threads_.size() < limits_.threads) {
      try {
        threads_.emplace_back([this] {
          NameThisThread("iso-translate");
          Run();
        });
      } catch (const std::system_error& e) {
        NoteThreadRefused();
        if (threads_.empty()) {
          if (mine == 0) per_caller_.erase(caller);
          return ResourceExhausted(what, ": no thread to translate on (", e.what(), ")");
        }
        spdlog::warn("translate pool: a thread start was refused ({}); {} threads serve", e.what(),
                     threads_.size());
      }
    }
    ++mine;
    queue_.push_back({caller, std::move(work)});
    return OkStatus();
  }

  Status CheckWeight(int64_t weight, std::string_view what) const override {
    return CheckTranslateWeight(weight, limits_.max_weight, what);
  }

 private:
  struct Item {
    std::string caller;
    Work work;
  };

  void Run() {
    mu_.Lock();
    for (;;) {
      ++idle_;
      mu_.Await(absl::Condition(
          +[](Pool* p)
               ABSL_SHARED_LOCKS_REQUIRED(p->mu_) { return p->stopping_ || !p->queue_.empty(); },
          this));
      --idle_;
      if (stopping_) break;
      Item item = std::move(queue_.front());
      queue_.pop_front();
      mu_.Unlock();
      Answer answer = item.work(OkStatus());
      item.work = nullptr;  // what it holds goes before the caller's count
      mu_.Lock();
      auto it = per_caller_.find(item.caller);
      if (--it->second == 0) per_caller_.erase(it);
      // Answered after the release: a sequential caller's next call came
      // back RESOURCE_EXHAUSTED when this thread was slower than the
      // client (a loaded machine).
      if (answer) {
        mu_.Unlock();
        answer();
        answer = nullptr;
        mu_.Lock();
      }
    }
    mu_.Unlock();
  }

  const Limits limits_;
  absl::Mutex mu_;
  std::vector<std::thread> threads_ ABSL_GUARDED_BY(mu_);
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, uint32_t> per_caller_ ABSL_GUARDED_BY(mu_);  // queued or running
  uint32_t idle_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
};

// Saturating: a message within gRPC's size limit cannot overflow, but
// the cap keeps the sum meaningful whatever the limit.
constexpr int64_t kCap = kMaxDatatypeWeight * 4;
int64_t Sat(int64_t a, int64_t b) { return a > kCap - b ? kCap : a + b; }

}  // namespace

std::unique_ptr<TranslatePool> TranslatePool::Make(const Limits& limits) {
  return std::make_unique<Pool>(limits);
}

int64_t WeightOf(const v1::Datatype& t) {
  switch (t.type_case()) {
    case v1::Datatype::kContiguous:
      return Sat(1, WeightOf(t.contiguous().old()));
    case v1::Datatype::kVector:
      return Sat(1, WeightOf(t.vector().old()));
    case v1::Datatype::kHvector:
      return Sat(1, WeightOf(t.hvector().old()));
    case v1::Datatype::kIndexed:
    case v1::Datatype::kHindexed: {
      const v1::TypeIndexed& x = t.has_indexed() ? t.indexed() : t.hindexed();
      return Sat(1 + std::max(x.blocklengths_size(), x.displacements_size()), WeightOf(x.old()));
    }
    case v1::Datatype::kIndexedBlock:
    case v1::Datatype::kHindexedBlock: {
      const v1::TypeIndexedBlock& x =
          t.has_indexed_block() ? t.indexed_block() : t.hindexed_block();
      return Sat(1 + x.displacements_size(), WeightOf(x.old()));
    }
    case v1::Datatype::kStructType: {
      const v1::TypeStruct& x = t.struct_type();
      int64_t w = 1 + std::max(x.blocklengths_size(), x.displacements_size());
      for (const v1::Datatype& c : x.types()) w = Sat(w, WeightOf(c));
      return w;
    }
    case v1::Datatype::kSubarray:
      return Sat(1 + t.subarray().sizes_size(), WeightOf(t.subarray().old()));
    case v1::Datatype::kDarray:
      return Sat(1 + t.darray().gsizes_size(), WeightOf(t.darray().old()));
    case v1::Datatype::kResized:
      return Sat(1, WeightOf(t.resized().old()));
    default:  // basic, registered (checked once decoded), unset
      return 1;
  }
}

Status CheckTranslateWeight(int64_t weight, int64_t max_weight, std::string_view what) {
  if (weight <= max_weight) return OkStatus();
  return ResourceExhausted(what, ": its datatypes weigh ", weight,
                           " (nodes and array entries); daemon.max_translate_weight is ",
                           max_weight);
}

}  // namespace isometry
