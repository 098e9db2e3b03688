// The (peer, class) pairs whose eager puts a peer declined lately
// (cluster.eager_put_size; the peer caps or pauses the class it places
// them in). While a pair is held, its small copies to that peer go as
// halves at once, without a put that would be declined again: a wasted
// round trip at most once per window. The window ends on its own, so a
// reload there that lifts the cap brings puts back.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace isometry::cluster {

class DeclinedPuts {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::seconds kWindow{30};

  // Whether puts of `qos_class` to `peer` were declined within the window.
  bool Holds(const std::string& peer, const std::string& qos_class,
             Clock::time_point now = Clock::now()) const {
    absl::MutexLock lock(&mu_);
    auto it = until_.find({peer, qos_class});
    return it != until_.end() && now < it->second;
  }

  // A put was declined: the window starts again. True when none was
  // running (the caller logs it once, not on every put).
  bool Remember(const std::string& peer, const std::string& qos_class,
                Clock::time_point now = Clock::now()) {
    absl::MutexLock lock(&mu_);
    ++count_[peer];
    auto [it, fresh] = until_.try_emplace({peer, qos_class}, now);
    const bool began = fresh || it->second <= now;
    it->second = now + kWindow;
    return began;
  }

  // Puts `peer` declined since the daemon started (PeerInfo).
  uint64_t Count(const std::string& peer) const {
    absl::MutexLock lock(&mu_);
    auto it = count_.find(peer);
    return it == count_.end() ? 0 : it->second;
  }

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, uint64_t> count_ ABSL_GUARDED_BY(mu_);
  // Bounded by peers times classes; an ended window is reused.
  std::map<std::pair<std::string, std::string>, Clock::time_point> until_ ABSL_GUARDED_BY(mu_);
};

}  // namespace isometry::cluster
