// The RDMA channel (channels/rdma/rdma_channel.h) with its own threads,
// two of them joined by an in-memory fabric that lands a write in the
// peer's ring as it is posted (a thread-safe stand-in for a pair of RC
// QPs). A routed transfer's chunks are gathered from a strided source and
// scattered into a strided destination, verified; an unrouted one goes to
// the fallback (TCP) channel whole; a failed completion fails the
// requests in flight with the device's text and reports the error.
#include "channels/rdma/rdma_channel.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "unit/rdma_test_fabric.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::rdma;
using namespace isometry::rdma::test;

namespace {

struct Pair {
  explicit Pair(RingShape ring) {
    auto fa = std::make_unique<ThreadedFabric>(&wire, ring);
    auto fb = std::make_unique<ThreadedFabric>(&wire, ring);
    fa->peer = fb.get();
    fb->peer = fa.get();
    ChannelConfig c;
    c.name = "rdma:b";
    c.request_bytes = 1 << 20;
    auto ca = MakeRdmaChannel(c, std::move(fa), ring, 2, &tcp_a,
                              [this](const Status& s) { errors_a.set_value(s); });
    c.name = "rdma:a";
    auto cb = MakeRdmaChannel(c, std::move(fb), ring, 2, &tcp_b, nullptr);
    REQUIRE(ca.ok());
    REQUIRE(cb.ok());
    a = std::move(*ca);
    b = std::move(*cb);
  }
  Wire wire;
  Recording tcp_a, tcp_b;
  std::promise<Status> errors_a;
  std::unique_ptr<RdmaChannel> a, b;
};

// Submits `n` chunks of transfer `t` from a (src) to b (dst) and waits
// for every request; returns their statuses, sends first.
std::vector<Status> Copy(Pair& p, uint64_t t, uint64_t n, const std::vector<std::byte>& src,
                         std::vector<std::byte>& dst, uint64_t rows, uint64_t row,
                         uint64_t stride) {
  const uint64_t chunk_src = rows * stride;
  std::vector<std::promise<Status>> sent(n), landed(n);
  for (uint64_t c = 0; c < n; ++c) {
    ChannelRequest r;
    r.program = Strided(rows, row, stride, false);  // wire (dense) to strided place
    r.src = NetHalf{t, c, "a"};
    r.dst = HostBytes{dst.data() + c * chunk_src};
    p.b->Submit(std::move(r), [&landed, c](const Status& s) { landed[c].set_value(s); });
  }
  for (uint64_t c = 0; c < n; ++c) {
    ChannelRequest r;
    r.program = Strided(rows, row, stride, true);  // strided source to the wire
    r.src = HostBytes{const_cast<std::byte*>(src.data()) + c * chunk_src};
    r.dst = NetHalf{t, c, "b"};
    p.a->Submit(std::move(r), [&sent, c](const Status& s) { sent[c].set_value(s); });
  }
  std::vector<Status> out;
  out.reserve(2 * n);
  for (auto& f : sent) out.push_back(f.get_future().get());
  for (auto& f : landed) out.push_back(f.get_future().get());
  return out;
}

}  // namespace

TEST_CASE("a routed transfer is gathered, written and scattered; an unrouted one takes TCP") {
  Pair p(RingShape{4, 4096});
  constexpr uint64_t kRows = 16, kRow = 200, kStride = 256, kChunks = 50;
  std::vector<std::byte> src(kChunks * kRows * kStride), dst(src.size(), std::byte{0});
  std::mt19937 rng(3);
  for (auto& x : src) x = static_cast<std::byte>(rng());
  REQUIRE(p.a->Route(7, {5, kChunks, true}).ok());
  REQUIRE(p.b->Route(7, {5, kChunks, false}).ok());
  p.b->AwaitRoutes();  // the tag open before a's first chunk can land
  CHECK(p.a->Route(7, {6, 1, true}).code() == absl::StatusCode::kAlreadyExists);
  CHECK(p.a->Route(8, {5, 1, true}).code() == absl::StatusCode::kAlreadyExists);
  for (const Status& s : Copy(p, 7, kChunks, src, dst, kRows, kRow, kStride)) {
    REQUIRE(s.ok());
  }
  for (uint64_t r = 0; r < kChunks * kRows; ++r) {
    REQUIRE(std::memcmp(dst.data() + r * kStride, src.data() + r * kStride, kRow) == 0);
    REQUIRE(dst[r * kStride + kRow] == std::byte{0});  // the gaps untouched
  }
  CHECK(p.tcp_a.requests == 0);
  CHECK(p.tcp_b.requests == 0);
  p.a->Unroute(7);
  p.b->Unroute(7);
  // Not routed: every request goes to the fallback, on both sides.
  for (const Status& s : Copy(p, 9, 3, src, dst, kRows, kRow, kStride)) {
    CHECK(s.code() == absl::StatusCode::kAborted);
  }
  CHECK(p.tcp_a.requests == 3);
  CHECK(p.tcp_b.requests == 3);
  p.a->AbandonTransfer(9, absl::CancelledError("x"));
  CHECK(p.tcp_a.abandoned == 1);
  // The tag is free again once unrouted: a dense transfer under it.
  REQUIRE(p.a->Route(10, {5, 1, true}).ok());
  REQUIRE(p.b->Route(10, {5, 1, false}).ok());
  std::vector<std::byte> one(1000, std::byte{7}), got(1000);
  std::promise<Status> s1, s2;
  ChannelRequest rx;
  rx.program = ContiguousProgram(1000);
  rx.src = NetHalf{10, 0, "a"};
  rx.dst = HostBytes{got.data()};
  p.b->Submit(std::move(rx), [&](const Status& s) { s2.set_value(s); });
  ChannelRequest tx;
  tx.program = ContiguousProgram(1000);
  tx.src = HostBytes{one.data()};
  tx.dst = NetHalf{10, 0, "b"};
  p.a->Submit(std::move(tx), [&](const Status& s) { s1.set_value(s); });
  CHECK(s1.get_future().get().ok());
  CHECK(s2.get_future().get().ok());
  CHECK(got == one);
}

TEST_CASE("a failed completion fails the transfer with the device's text") {
  Pair p(RingShape{2, 4096});
  std::vector<std::byte> src(size_t{8} * 4096), dst(src.size());
  REQUIRE(p.a->Route(1, {1, 8, true}).ok());
  REQUIRE(p.b->Route(1, {1, 8, false}).ok());
  {
    std::lock_guard<std::mutex> lock(p.wire.mu);
    p.wire.fail_next_write = "remote access error (status 10, vendor error 136) on wr 0";
  }
  std::vector<std::promise<Status>> sent(8);
  for (uint64_t c = 0; c < 8; ++c) {
    ChannelRequest r;
    r.program = ContiguousProgram(4096);
    r.src = HostBytes{src.data() + c * 4096};
    r.dst = NetHalf{1, c, "b"};
    p.a->Submit(std::move(r), [&sent, c](const Status& s) { sent[c].set_value(s); });
  }
  for (auto& f : sent) {
    const Status s = f.get_future().get();
    CHECK(s.code() == absl::StatusCode::kUnavailable);
    CHECK_THAT(std::string(s.message()), Catch::Contains("remote access error"));
  }
  const Status reported = p.errors_a.get_future().get();
  CHECK_THAT(std::string(reported.message()), Catch::Contains("remote access error"));
  // Later requests of it fail with the same error (never over TCP) until
  // it is unrouted; then the tag may be routed again.
  std::promise<Status> late;
  ChannelRequest r;
  r.program = ContiguousProgram(4096);
  r.src = HostBytes{src.data()};
  r.dst = NetHalf{1, 0, "b"};
  p.a->Submit(std::move(r), [&](const Status& s) { late.set_value(s); });
  CHECK_THAT(std::string(late.get_future().get().message()),
             Catch::Contains("remote access error"));
  CHECK(p.tcp_a.requests == 0);
  CHECK(p.a->Route(1, {1, 8, true}).code() == absl::StatusCode::kAlreadyExists);
  p.a->Unroute(1);
  CHECK(p.a->Route(1, {1, 8, true}).ok());
}

TEST_CASE("bad endpoints fail the request, not the channel") {
  Pair p(RingShape{2, 4096});
  std::promise<Status> f;
  ChannelRequest r;
  r.program = ContiguousProgram(16);
  r.src = FileRange{};
  r.dst = NetHalf{1, 0, "b"};
  p.a->Submit(std::move(r), [&](const Status& s) { f.set_value(s); });
  CHECK(f.get_future().get().code() == absl::StatusCode::kFailedPrecondition);
  CHECK(MakeRdmaChannel(ChannelConfig{}, nullptr, RingShape{2, 16}, 1, nullptr, nullptr)
            .status()
            .code() == absl::StatusCode::kInvalidArgument);
  CHECK_FALSE(
      MakeRdmaChannel(ChannelConfig{}, nullptr, RingShape{0, 16}, 1, nullptr, nullptr).ok());
}

}  // namespace ISOMETRY_TEST_FILE
