// The daemon's side of a hop window (channels/cma/own_hops.h), without a
// client: how the data area is lent to several transfers at once, and
// that a block whose hop was given up on is not lent again until that hop
// is answered. The client is played by writing the window's done ring.
#include <catch2/catch.hpp>
#include <cstring>
#include <vector>

#include "channels/cma/own_hops.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

struct Window {
  static constexpr uint64_t kBytes = 8 << 20;
  static constexpr uint64_t kArena = 1 << 20;
  std::vector<std::byte> memory = std::vector<std::byte>(kBytes + 4096);
  // Page-aligned, as the daemon's mapping is.
  std::byte* base =
      memory.data() + (4096 - reinterpret_cast<uintptr_t>(memory.data()) % 4096) % 4096;
  std::shared_ptr<OwnHopsTotals> totals = std::make_shared<OwnHopsTotals>();
  std::shared_ptr<OwnHops> hops;

  Window() {
    auto h = OwnHops::Create(
        base, kBytes, kArena, [] {}, nullptr, std::chrono::milliseconds(200), "test client",
        totals);
    REQUIRE(h.ok());
    hops = *std::move(h);
  }
  hop_window::HopWindowHeader& header() {
    return *reinterpret_cast<hop_window::HopWindowHeader*>(base);
  }
  // The client answers the work entry at `index` of the work ring.
  void Answer(uint32_t index) {
    hop_window::HopWindowHeader& h = header();
    const uint64_t id = h.work[index % hop_window::kHopEntries].id;
    const uint32_t tail = h.done_tail.value.load();
    h.done[tail % hop_window::kHopEntries] = hop_window::DoneEntry{id, 0, 0};
    h.done_tail.value.store(tail + 1);
  }
};

}  // namespace

TEST_CASE("the data area is lent to several transfers at once, first fit") {
  Window w;
  const uint64_t area = w.hops->data_bytes();
  REQUIRE(area >= 3 << 20);
  std::byte* a = w.hops->TryTake(1 << 20);
  std::byte* b = w.hops->TryTake(1 << 20);
  REQUIRE(a != nullptr);
  REQUIRE(b != nullptr);
  CHECK(b == a + (1 << 20));
  CHECK(w.hops->InData(a));
  CHECK(w.hops->InData(b + (1 << 20) - 1));
  // No room for what is left plus one byte.
  CHECK(w.hops->TryTake(area - (2 << 20) + 1) == nullptr);
  CHECK(w.totals->not_lent == 1);
  // The hole a leaves is filled first.
  w.hops->Give(a);
  CHECK(w.hops->TryTake(1 << 19) == a);
  CHECK(w.hops->TryTake(1 << 19) == a + (1 << 19));
  CHECK(w.hops->TryTake(0) == nullptr);
  CHECK(w.hops->TryTake(area + 1) == nullptr);
  CHECK(w.totals->windows == 1);
  w.hops->Close();
  CHECK(w.totals->windows == 0);
  CHECK(w.hops->TryTake(1) == nullptr);  // closed: nothing is lent
}

TEST_CASE("a block whose hop was given up on stays held until the client answers it") {
  Window w;
  const uint64_t area = w.hops->data_bytes();
  std::byte* block = w.hops->TryTake(area);
  REQUIRE(block != nullptr);
  // A hop posted into it and given up on at once (its copy was cancelled).
  const std::atomic<bool> cancelled{true};
  const std::optional<Status> s =
      w.hops->Run(*ContiguousProgram(4096), block, 0x1000, CmaDirection::kWrite, &cancelled);
  REQUIRE(s);
  CHECK(s->code() == absl::StatusCode::kCancelled);
  w.hops->Give(block);
  // Still held: the client may run that hop late and write in it.
  CHECK(w.hops->TryTake(area) == nullptr);
  std::byte* other = w.hops->TryTake(1 << 20);
  CHECK(other == nullptr);  // the whole area was that block
  w.Answer(0);
  // Answered: the block is free again.
  CHECK(w.hops->TryTake(area) == block);
  CHECK(w.totals->bogus == 0);
  // An answer nobody asked for is counted, and changes nothing.
  w.Answer(0);
  w.hops->Give(block);
  CHECK(w.hops->TryTake(1 << 20) == block);
  CHECK(w.totals->bogus == 1);
}

TEST_CASE("a block given back with no hop left in it is free at once") {
  Window w;
  std::byte* block = w.hops->TryTake(1 << 20);
  REQUIRE(block != nullptr);
  const std::atomic<bool> cancelled{true};
  // The abandoned hop runs in another block: this one is not held.
  std::byte* busy = w.hops->TryTake(1 << 20);
  REQUIRE(busy != nullptr);
  REQUIRE(w.hops->Run(*ContiguousProgram(4096), busy, 0x1000, CmaDirection::kRead, &cancelled));
  w.hops->Give(block);
  w.hops->Give(busy);
  CHECK(w.hops->TryTake(1 << 20) == block);
  CHECK(w.hops->TryTake(1 << 20) == busy + (1 << 20));  // busy is still held
}

}  // namespace ISOMETRY_TEST_FILE
