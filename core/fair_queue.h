// A queue shared by weight between classes: start-time fair queuing over
// bytes, priority order within a class. The data plane's connections queue
// their DATA in one (net/peer_link_conn.h), so a busy link is shared
// between QoS classes by weight (docs/guides/qos.md) as the DMA workers
// share the other channels (daemon/runtime/qos_scheduler.h).
//
// Each class has a finish tag in virtual time (bytes over weight); Pop()
// serves the class whose start tag, the later of its finish tag and the
// queue's virtual time, is smallest, and takes that class's first item
// (highest priority, then first pushed). A class that was idle starts at
// the virtual time: it gets no credit for the time it sent nothing. With
// one class it is a priority queue, first-in first-out within a priority.
//
// Not thread-safe: its owner locks.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <utility>

namespace isometry {

template <typename T>
class FairQueue {
 public:
  // `weight` is the class's weight now (0 counts as 1); `bytes`, what
  // serving the item sends.
  void Push(uint32_t cls, uint32_t weight, int priority, uint64_t bytes, T value) {
    Lane& lane = lanes_[cls];
    lane.weight = std::max<uint32_t>(weight, 1);
    auto at = std::find_if(lane.items.begin(), lane.items.end(),
                           [priority](const Item& i) { return i.priority < priority; });
    lane.items.insert(at, Item{priority, bytes, std::move(value)});
    ++size_;
  }

  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }

  // The next item; the queue must not be empty.
  T Pop() {
    auto best = lanes_.end();
    double best_start = 0;
    for (auto it = lanes_.begin(); it != lanes_.end(); ++it) {
      if (it->second.items.empty()) continue;
      const double start = std::max(it->second.finish, virtual_time_);
      if (best == lanes_.end() || start < best_start) {
        best = it;
        best_start = start;
      }
    }
    Lane& lane = best->second;
    Item item = std::move(lane.items.front());
    lane.items.pop_front();
    --size_;
    virtual_time_ = best_start;
    lane.finish = best_start + static_cast<double>(item.bytes) / lane.weight;
    Forget();
    return std::move(item.value);
  }

  // Hands every item for which `pred` holds to `fn`, in no particular
  // order, and takes them out; the classes' tags are left as they are.
  template <typename Pred, typename Fn>
  void RemoveIf(Pred&& pred, Fn&& fn) {
    for (auto& [cls, lane] : lanes_) {
      for (auto it = lane.items.begin(); it != lane.items.end();) {
        if (!pred(it->value)) {
          ++it;
          continue;
        }
        fn(std::move(it->value));
        it = lane.items.erase(it);
        --size_;
      }
    }
    Forget();
  }

  // Hands every item to `fn` in no particular order and empties the queue.
  template <typename Fn>
  void Drain(Fn&& fn) {
    for (auto& [cls, lane] : lanes_) {
      for (Item& i : lane.items) fn(std::move(i.value));
    }
    lanes_.clear();
    size_ = 0;
  }

 private:
  struct Item {
    int priority = 0;
    uint64_t bytes = 0;
    T value;
  };
  struct Lane {
    std::deque<Item> items;
    double finish = 0;
    uint32_t weight = 1;
  };

  // An idle class whose finish tag the virtual time has passed would
  // start at the virtual time anyway: its lane goes, so lanes are only
  // the classes sending now.
  void Forget() {
    std::erase_if(lanes_, [this](const auto& kv) {
      return kv.second.items.empty() && kv.second.finish <= virtual_time_;
    });
    if (lanes_.empty()) virtual_time_ = 0;  // so the tags never grow past a double's precision
  }

  std::map<uint32_t, Lane> lanes_;
  double virtual_time_ = 0;
  size_t size_ = 0;
};

}  // namespace isometry
