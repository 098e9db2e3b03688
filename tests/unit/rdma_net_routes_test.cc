// Which transport a network hop takes (channels/rdma/net_routes.h), on two
// "nodes" a and b: each has its NetRoutes and the network channel of the
// other (MakeNetChannel over a recording TCP stand-in), and their RDMA
// channels are joined by the in-memory fabric (rdma_test_fabric.h). A copy
// goes over RDMA only when both halves routed it (the receiver's tag given
// to the sender); otherwise, with no link attached, with chunks larger
// than a slot, after the link broke and was detached, every request takes
// TCP. A copy routed on a channel ends on it after it is replaced.
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <random>
#include <set>
#include <vector>

#include "channels/rdma/net_routes.h"
#include "unit/rdma_test_fabric.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;
using namespace isometry::rdma::test;

namespace {

constexpr RingShape kRing{4, 4096};

// Two nodes' routes and network channels; Link() makes a joined pair of
// RDMA channels, Attach() puts them behind both nodes' routes.
struct Nodes {
  Nodes() {
    auto ta = std::make_unique<Recording>();
    auto tb = std::make_unique<Recording>();
    tcp_a = ta.get();
    tcp_b = tb.get();
    net_a = MakeNetChannel(std::move(ta), routes_a);
    net_b = MakeNetChannel(std::move(tb), routes_b);
  }
  // A fresh link: its wire lives as long as the channels (kept with them).
  void Attach() {
    auto wire = std::make_shared<Wire>();
    auto fa = std::make_unique<ThreadedFabric>(wire.get(), kRing);
    auto fb = std::make_unique<ThreadedFabric>(wire.get(), kRing);
    fa->peer = fb.get();
    fb->peer = fa.get();
    ChannelConfig c;
    c.name = "rdma:b";
    c.request_bytes = kRing.slot_bytes;
    auto ca = MakeRdmaChannel(c, std::move(fa), kRing, 2, nullptr,
                              [this](const Status& s) { broke.push_back(s); });
    c.name = "rdma:a";
    auto cb = MakeRdmaChannel(c, std::move(fb), kRing, 2, nullptr, nullptr);
    REQUIRE(ca.ok());
    REQUIRE(cb.ok());
    routes_a->Attach("b", *std::move(ca), kRing.slot_bytes, wire);
    routes_b->Attach("a", *std::move(cb), kRing.slot_bytes, wire);
    wires.push_back(wire);
  }
  // Both halves of copy `t` (`chunks` chunks of `bytes`): b receives and
  // picks the tag, a sends under it. Returns the tag (0: TCP).
  uint32_t Route(uint64_t t, uint64_t chunks, uint64_t bytes, std::string* why = nullptr) {
    auto tag = routes_b->RouteReceiving("a", t, chunks, bytes, why);
    REQUIRE(tag.ok());
    if (*tag != 0) REQUIRE(routes_a->RouteSending("b", t, *tag, chunks).ok());
    return *tag;
  }
  void Unroute(uint64_t t) {
    routes_a->Unroute("b", t);
    routes_b->Unroute("a", t);
  }
  // Runs copy `t`: `n` chunks of `rows` rows of `row` bytes, `stride`
  // apart on both sides, through the network channels. Statuses of the
  // sends, then of the receives.
  std::vector<Status> Copy(uint64_t t, uint64_t n, const std::vector<std::byte>& src,
                           std::vector<std::byte>& dst, uint64_t rows, uint64_t row,
                           uint64_t stride) {
    std::vector<std::promise<Status>> sent(n), landed(n);
    for (uint64_t c = 0; c < n; ++c) {
      ChannelRequest r;
      r.program = Strided(rows, row, stride, false);
      r.src = NetHalf{t, c, "a"};
      r.dst = HostBytes{dst.data() + c * rows * stride};
      net_b->Submit(std::move(r), [&landed, c](const Status& s) { landed[c].set_value(s); });
    }
    for (uint64_t c = 0; c < n; ++c) {
      ChannelRequest r;
      r.program = Strided(rows, row, stride, true);
      r.src = HostBytes{const_cast<std::byte*>(src.data()) + c * rows * stride};
      r.dst = NetHalf{t, c, "b"};
      net_a->Submit(std::move(r), [&sent, c](const Status& s) { sent[c].set_value(s); });
    }
    std::vector<Status> out;
    out.reserve(2 * n);
    for (auto& f : sent) out.push_back(f.get_future().get());
    for (auto& f : landed) out.push_back(f.get_future().get());
    return out;
  }

  std::shared_ptr<NetRoutes> routes_a = std::make_shared<NetRoutes>();
  std::shared_ptr<NetRoutes> routes_b = std::make_shared<NetRoutes>();
  Recording* tcp_a = nullptr;
  Recording* tcp_b = nullptr;
  std::unique_ptr<Channel> net_a, net_b;
  std::vector<std::shared_ptr<Wire>> wires;
  std::vector<Status> broke;  // a's channels' errors (on their threads; read after the fact)
};

constexpr uint64_t kRows = 16, kRow = 200, kStride = 256;  // 3200 bytes a chunk

std::vector<std::byte> Random(size_t n, unsigned seed) {
  std::vector<std::byte> v(n);
  std::mt19937 rng(seed);
  for (auto& x : v) x = static_cast<std::byte>(rng());
  return v;
}

bool Same(const std::vector<std::byte>& src, const std::vector<std::byte>& dst, uint64_t rows) {
  for (uint64_t r = 0; r < rows; ++r) {
    if (std::memcmp(dst.data() + r * kStride, src.data() + r * kStride, kRow) != 0) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("without an RDMA link every hop takes TCP, and the route says why") {
  Nodes n;
  std::string why;
  CHECK(n.Route(1, 4, 3200, &why) == 0);
  CHECK_THAT(why, Catch::Contains("no RDMA link with peer 'a' is connected"));
  CHECK_FALSE(n.routes_a->Attached("b"));
  CHECK(n.routes_a->SlotBytes("b") == 0);
  // A sender told to use RDMA with no link here refuses (the copy fails:
  // never half over TCP).
  const Status s = n.routes_a->RouteSending("b", 1, 5, 4);
  CHECK(s.code() == absl::StatusCode::kUnavailable);
  CHECK_THAT(std::string(s.message()), Catch::Contains("no RDMA link with it is connected here"));
  CHECK(n.routes_a->RouteSending("b", 1, 0, 4).code() == absl::StatusCode::kInvalidArgument);
  CHECK(n.routes_a->RouteSending("b", 1, 256, 4).code() == absl::StatusCode::kInvalidArgument);
  const auto src = Random(4 * kRows * kStride, 1);
  std::vector<std::byte> dst(src.size());
  for (const Status& st : n.Copy(1, 4, src, dst, kRows, kRow, kStride)) {
    CHECK(st.code() == absl::StatusCode::kAborted);  // Recording: "went to TCP"
  }
  CHECK(n.tcp_a->requests == 4);
  CHECK(n.tcp_b->requests == 4);
}

TEST_CASE("a copy routed by both halves runs over RDMA; others beside it take TCP") {
  Nodes n;
  n.Attach();
  CHECK(n.routes_a->Attached("b"));
  CHECK(n.routes_b->SlotBytes("a") == kRing.slot_bytes);
  constexpr uint64_t kChunks = 40;
  const auto src = Random(kChunks * kRows * kStride, 2);
  std::vector<std::byte> dst(src.size(), std::byte{0});
  const uint32_t tag = n.Route(7, kChunks, kRows * kRow);
  REQUIRE(tag != 0);
  CHECK(n.routes_a->TagOf("b", 7) == tag);
  CHECK(n.routes_b->TagOf("a", 7) == tag);
  // Routed twice: refused.
  CHECK(n.routes_b->RouteReceiving("a", 7, kChunks, 100, nullptr).status().code() ==
        absl::StatusCode::kAlreadyExists);
  for (const Status& s : n.Copy(7, kChunks, src, dst, kRows, kRow, kStride)) REQUIRE(s.ok());
  CHECK(Same(src, dst, kChunks * kRows));
  CHECK(dst[kRow] == std::byte{0});  // the gaps untouched
  CHECK(n.tcp_a->requests == 0);
  CHECK(n.tcp_b->requests == 0);
  // Not routed (copy 8) while the link is attached: TCP whole.
  for (const Status& s : n.Copy(8, 2, src, dst, kRows, kRow, kStride)) {
    CHECK(s.code() == absl::StatusCode::kAborted);
  }
  CHECK(n.tcp_a->requests == 2);
  // Abandoning reaches the RDMA channel and TCP (which tells the peer).
  n.net_a->AbandonTransfer(7, absl::CancelledError("given up"));
  CHECK(n.tcp_a->abandoned == 1);
  n.Unroute(7);
  CHECK(n.routes_a->TagOf("b", 7) == 0);
}

TEST_CASE("chunks larger than a ring slot take TCP; tags differ between copies") {
  Nodes n;
  n.Attach();
  std::string why;
  CHECK(n.Route(1, 3, kRing.slot_bytes + 1, &why) == 0);
  CHECK_THAT(why, Catch::Contains("exceed a ring slot (4096 bytes, rdma.slot_kib)"));
  // Live copies never share a tag; an ended copy's tag comes round again
  // only after the others (round robin over 1..255).
  std::set<uint32_t> tags;
  for (uint64_t t = 10; t < 10 + kMaxTag; ++t) {
    const uint32_t tag = n.Route(t, 1, 100);
    REQUIRE(tag != 0);
    CHECK(tags.insert(tag).second);
  }
  CHECK(n.Route(999, 1, 100, &why) == 0);
  CHECK_THAT(why, Catch::Contains("all 255 RDMA tags with peer 'a' are in use"));
  const uint32_t freed = n.routes_b->TagOf("a", 20);
  n.Unroute(20);
  CHECK(n.Route(1000, 1, 100) == freed);
}

TEST_CASE("a broken link fails its copies; once detached new copies take TCP") {
  Nodes n;
  n.Attach();
  constexpr uint64_t kChunks = 6;
  const auto src = Random(kChunks * kRows * kStride, 3);
  std::vector<std::byte> dst(src.size());
  REQUIRE(n.Route(1, kChunks, kRows * kRow) != 0);
  {
    std::lock_guard<std::mutex> lock(n.wires.back()->mu);
    n.wires.back()->fail_next_write = "transport retry counter exceeded (status 12) on wr 1";
  }
  // The sends fail with the device's text; b's chunks still wait (the
  // peer's side fails on its own completion or the initiator's abort).
  std::vector<std::promise<Status>> sent(kChunks);
  for (uint64_t c = 0; c < kChunks; ++c) {
    ChannelRequest r;
    r.program = Strided(kRows, kRow, kStride, true);
    r.src = HostBytes{const_cast<std::byte*>(src.data()) + c * kRows * kStride};
    r.dst = NetHalf{1, c, "b"};
    n.net_a->Submit(std::move(r), [&sent, c](const Status& s) { sent[c].set_value(s); });
  }
  for (auto& f : sent) {
    const Status s = f.get_future().get();
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(s.message()), Catch::Contains("transport retry counter exceeded"));
  }
  // What the cluster does on the channel's error: detach, both ends.
  CHECK(n.routes_a->Detach("b"));
  CHECK(n.routes_b->Detach("a"));
  CHECK_FALSE(n.routes_a->Detach("b"));
  n.Unroute(1);  // the failed copy ends; its (retired) channel may go
  std::string why;
  CHECK(n.Route(2, kChunks, kRows * kRow, &why) == 0);
  CHECK_THAT(why, Catch::Contains("no RDMA link"));
  for (const Status& s : n.Copy(2, kChunks, src, dst, kRows, kRow, kStride)) {
    CHECK(s.code() == absl::StatusCode::kAborted);  // over TCP
  }
  CHECK(n.tcp_a->requests == static_cast<int>(kChunks));
  // A new link: RDMA again.
  n.Attach();
  REQUIRE(n.Route(3, kChunks, kRows * kRow) != 0);
  std::vector<std::byte> again(src.size());
  for (const Status& s : n.Copy(3, kChunks, src, again, kRows, kRow, kStride)) REQUIRE(s.ok());
  CHECK(Same(src, again, kChunks * kRows));
  n.Unroute(3);
}

TEST_CASE("a copy routed on a replaced channel ends on it; new copies take the new one") {
  Nodes n;
  n.Attach();
  constexpr uint64_t kChunks = 8;
  const auto src = Random(2 * kChunks * kRows * kStride, 4);
  std::vector<std::byte> first(src.size()), second(src.size());
  REQUIRE(n.Route(1, kChunks, kRows * kRow) != 0);
  n.Attach();  // the link connected again (a new hello): replaces both ends
  REQUIRE(n.Route(2, kChunks, kRows * kRow) != 0);
  // Copy 1 still runs on the first link's channels, copy 2 on the new.
  auto one = std::async(std::launch::async,
                        [&] { return n.Copy(1, kChunks, src, first, kRows, kRow, kStride); });
  for (const Status& s : n.Copy(2, kChunks, src, second, kRows, kRow, kStride)) REQUIRE(s.ok());
  for (const Status& s : one.get()) REQUIRE(s.ok());
  CHECK(Same(src, first, kChunks * kRows));
  CHECK(Same(src, second, kChunks * kRows));
  CHECK(n.tcp_a->requests == 0);
  n.Unroute(1);
  n.Unroute(2);
  CHECK(n.broke.empty());
}

}  // namespace ISOMETRY_TEST_FILE
