// The weighted queue the data plane's connections send from: shares by
// weight between classes, priority order within a class, no credit for
// idle time, and one class behaving as a plain priority queue.
#include "core/fair_queue.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <map>
#include <string>
#include <vector>

namespace ISOMETRY_TEST_FILE {

using isometry::FairQueue;

// The class of each item Pop() serves, `n` times, refilling each class so
// both stay backlogged.
std::map<int, int> ServedWhileBusy(FairQueue<int>& q, const std::map<int, uint32_t>& weights, int n,
                                   uint64_t bytes) {
  std::map<int, int> served;
  for (int i = 0; i < n; ++i) {
    const int cls = q.Pop();
    ++served[cls];
    q.Push(cls, weights.at(cls), 0, bytes, cls);
  }
  return served;
}

// Everything left, in the order Pop() serves it.
std::vector<std::string> PopAll(FairQueue<std::string>& q) {
  std::vector<std::string> order;
  while (!q.empty()) order.push_back(q.Pop());
  return order;
}

TEST_CASE("two busy classes share by weight") {
  FairQueue<int> q;
  const std::map<int, uint32_t> weights{{0, 3}, {1, 1}};
  for (int k = 0; k < 4; ++k) {
    q.Push(0, 3, 0, 1 << 20, 0);
    q.Push(1, 1, 0, 1 << 20, 1);
  }
  const auto served = ServedWhileBusy(q, weights, 4000, 1 << 20);
  CHECK(served.at(0) == 3000);
  CHECK(served.at(1) == 1000);
}

TEST_CASE("shares are by bytes, not by items") {
  FairQueue<int> q;
  // Equal weights, class 1's items four times larger: class 0 sends four
  // items for each of class 1's.
  std::map<int, int> served;
  for (int k = 0; k < 4; ++k) {
    q.Push(0, 1, 0, 1000, 0);
    q.Push(1, 1, 0, 4000, 1);
  }
  for (int i = 0; i < 500; ++i) {
    const int cls = q.Pop();
    ++served[cls];
    q.Push(cls, 1, 0, cls == 0 ? 1000 : 4000, cls);
  }
  CHECK(served.at(0) == 400);
  CHECK(served.at(1) == 100);
}

TEST_CASE("one class is a priority queue, first in first out within a priority") {
  FairQueue<std::string> q;
  q.Push(7, 1, 0, 10, "low-a");
  q.Push(7, 1, 5, 10, "high-a");
  q.Push(7, 1, 0, 10, "low-b");
  q.Push(7, 1, 5, 10, "high-b");
  q.Push(7, 1, 2, 10, "mid");
  CHECK(PopAll(q) == std::vector<std::string>{"high-a", "high-b", "mid", "low-a", "low-b"});
}

TEST_CASE("priority orders a class's own items, not the other class's") {
  FairQueue<std::string> q;
  // Class 1's high-priority item does not overtake class 0's turn: the
  // classes alternate (equal weights, equal sizes).
  q.Push(0, 1, 0, 10, "a1");
  q.Push(0, 1, 0, 10, "a2");
  q.Push(1, 1, 0, 10, "b-low");
  q.Push(1, 1, 9, 10, "b-high");
  CHECK(PopAll(q) == std::vector<std::string>{"a1", "b-high", "a2", "b-low"});
}

TEST_CASE("a class that was idle gets no credit for it") {
  FairQueue<int> q;
  // Class 0 sends alone for a while, then class 1 arrives: from then on
  // they alternate, class 1 does not get a burst to catch up.
  q.Push(0, 1, 0, 100, 0);
  for (int i = 0; i < 50; ++i) {
    CHECK(q.Pop() == 0);
    q.Push(0, 1, 0, 100, 0);
  }
  q.Push(1, 1, 0, 100, 1);
  std::vector<int> order;
  for (int i = 0; i < 6; ++i) {
    const int cls = q.Pop();
    order.push_back(cls);
    q.Push(cls, 1, 0, 100, cls);
  }
  int ones = 0;
  for (int c : order) ones += c;
  CHECK(ones == 3);
}

TEST_CASE("drain hands back every item and empties the queue") {
  FairQueue<int> q;
  for (int i = 0; i < 10; ++i) q.Push(i % 3, 1 + i % 2, i % 4, 64, i);
  CHECK(q.size() == 10);
  std::vector<int> got;
  q.Drain([&](int&& v) { got.push_back(v); });
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9});
  CHECK(q.empty());
  q.Push(4, 1, 0, 1, 42);
  CHECK(q.Pop() == 42);
}

TEST_CASE("remove-if takes out the matching items and leaves the rest in order") {
  FairQueue<std::string> q;
  q.Push(1, 1, 0, 64, "a1");
  q.Push(2, 1, 0, 64, "b1");
  q.Push(1, 1, 0, 64, "a2");
  q.Push(2, 1, 0, 64, "b2");
  q.Push(1, 1, 5, 64, "a0");
  std::vector<std::string> gone;
  q.RemoveIf([](const std::string& v) { return v[0] == 'b'; },
             [&](std::string&& v) { gone.push_back(v); });
  std::sort(gone.begin(), gone.end());
  CHECK(gone == std::vector<std::string>{"b1", "b2"});
  CHECK(q.size() == 3);
  CHECK(PopAll(q) == std::vector<std::string>{"a0", "a1", "a2"});
}

}  // namespace ISOMETRY_TEST_FILE
