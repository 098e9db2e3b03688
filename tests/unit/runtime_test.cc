#include "daemon/runtime/runtime.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>
#include <utility>

#include "channels/channel_factory.h"
#include "unit/runtime_test_util.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

RuntimeConfig SmallConfig(uint64_t th) {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.space_threshold = th;
  c.channels[0].request_bytes = 64 << 10;
  return c;
}

uint64_t StagingUsed(const Runtime& rt) {
  uint64_t used = 0;
  for (const MemoryUsage& m : rt.Memories()) used += m.staging_used;
  return used;
}

// Wraps the real channel; reports the request numbered `fail_at` (counting
// from 1 across the channel) as an I/O error.
class FaultyChannel final : public Channel {
 public:
  FaultyChannel(std::unique_ptr<Channel> inner, int fail_at)
      : inner_(std::move(inner)), fail_at_(fail_at) {}
  const ChannelCaps& caps() const override { return inner_->caps(); }
  void Submit(ChannelRequest req, RequestDone done) override {
    const bool fail = ++count_ == fail_at_;
    inner_->Submit(std::move(req), [done = std::move(done), fail](Status s) {
      done(fail ? Internal("injected I/O error") : std::move(s));
    });
  }

 private:
  std::unique_ptr<Channel> inner_;
  int fail_at_;
  std::atomic<int> count_{0};
};

// Wraps the real channel; counts requests that ask for non-temporal stores.
class StreamCountingChannel final : public Channel {
 public:
  StreamCountingChannel(std::unique_ptr<Channel> inner, std::atomic<int>& streamed,
                        std::atomic<int>& cached)
      : inner_(std::move(inner)), streamed_(streamed), cached_(cached) {}
  const ChannelCaps& caps() const override { return inner_->caps(); }
  void Submit(ChannelRequest req, RequestDone done) override {
    (req.stream_stores ? streamed_ : cached_)++;
    inner_->Submit(std::move(req), std::move(done));
  }

 private:
  std::unique_ptr<Channel> inner_;
  std::atomic<int>& streamed_;
  std::atomic<int>& cached_;
};

}  // namespace

TEST_CASE("a direct copy with a layout change completes and matches") {
  auto rt = Runtime::Create(DefaultRuntimeConfig());
  REQUIRE(rt.ok());
  const MemoryId sys = Mem(**rt, "sys0");
  const FieldSpace fs = *FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 1}});
  Buf src({Box::FromExtents({300, 200}), fs, Layout::Aos(2)}, 1);
  Buf dst({src.shape.bounds, fs, *Layout::Blocked({16, 7})}, 2);
  std::atomic<int> callbacks{0};
  auto t =
      (*rt)->Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .on_complete = [&](const Status& s) {
                     callbacks += s.ok() ? 1 : 100;
                   }});
  REQUIRE(t.ok());
  REQUIRE(t->Wait().ok());
  CHECK(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, src.shape.bounds) == "");
  CHECK(callbacks == 1);
  CHECK(t->path().edges.size() == 1);
  CHECK((*rt)->Stats().transfers_completed == 1);
}

TEST_CASE("multi-hop pipelines with TH far below the instance stay within TH") {
  const uint64_t th = 32 << 10;
  auto rt = Runtime::Create(SmallConfig(th));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0"), zcm = Mem(r, "zcm0");
  std::mt19937_64 rng(42);
  for (int i = 0; i < 45; ++i) {
    const int dims = 1 + i % 3;
    const int64_t ext = dims == 1 ? 40000 : (dims == 2 ? 250 : 40);
    Box bounds;
    bounds.dims = dims;
    for (int d = 0; d < dims; ++d) bounds.hi[d] = ext - static_cast<int64_t>(rng() % 7);
    FieldSpace fs = RandomFields(rng, 6);
    if (fs.total_bytes() < 8) fs = FieldSpace::Uniform(3, 4);
    Buf src({bounds, fs, RandomLayout(rng, bounds)}, static_cast<uint64_t>(i));
    Buf dst({bounds, fs, RandomLayout(rng, bounds)}, 1000u + static_cast<uint64_t>(i));
    // Random intermediate layouts, but with small blocking factors so one
    // entry of a chunk fits a slot.
    auto small_layout = [&] {
      Layout l = RandomLayout(rng, bounds);
      auto comps = l.components();
      for (auto& c : comps) {
        if (c.kind == LayoutComponent::Kind::kDimIn) c.block = 1 + c.block % 4;
      }
      return *Layout::Make(comps, dims);
    };
    const std::vector<HopSpec> via{{reg, small_layout()}, {zcm, small_layout()}};
    INFO("case " << i << ": " << src.shape.layout.ToString() << " -> " << via[0].layout.ToString()
                 << " -> " << via[1].layout.ToString() << " -> " << dst.shape.layout.ToString());
    REQUIRE(src.shape.total_bytes() > 4 * th);
    auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .via = via});
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    CHECK(t->path().edges.size() == 3);
    REQUIRE(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, bounds) == "");
  }
  for (const MemoryUsage& m : r.Memories()) {
    INFO(m.name);
    CHECK(m.largest_buffer <= th);  // the buffers' high-water mark
    CHECK(m.staging_used == 0);
  }
  CHECK(r.Memories()[1].largest_buffer > 0);
}

TEST_CASE(
    "a high-priority transfer behind 8 large low-priority ones has all its requests "
    "dispatched before any more of theirs") {
  // What the scheduler promises is dispatch order: a request already
  // running is not preempted, so which transfer *ends* first also depends
  // on thread scheduling (the latency benefit is measured by
  // tools/bench --scenario priority, not asserted here). The rate limit
  // keeps the low-priority work queued however slowly this thread runs.
  RuntimeConfig c = DefaultRuntimeConfig();
  c.channels[0].rate_limit_bytes_per_s = 1ull << 30;
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0");
  const uint64_t big = 32 << 20;
  const FieldSpace fs = FieldSpace::Uniform(1, 8);
  // 16 MiB: 4 requests of the channel's 4 MiB.
  Buf hs({Box::FromExtents({1 << 21}), fs, Layout::Aos(1)}, 7);
  Buf hd(hs.shape, 8);
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<Transfer> low;
  for (int i = 0; i < 8; ++i) {
    Buf* s = bufs.emplace_back(std::make_unique<Buf>(
                                   InstanceShape{Box::FromExtents({static_cast<int64_t>(big / 8)}),
                                                 fs, Layout::Aos(1)},
                                   i))
                 .get();
    bufs.emplace_back(std::make_unique<Buf>(s->shape, 100 + i));
  }
  for (int i = 0; i < 8; ++i) {
    Buf* s = bufs[2 * static_cast<size_t>(i)].get();
    Buf* d = bufs[2 * static_cast<size_t>(i) + 1].get();
    auto t = r.Copy({.src = s->Ref(sys), .dst = d->Ref(sys), .options = {.priority = 0}});
    REQUIRE(t.ok());
    low.push_back(*t);
  }
  // Let the low-priority work occupy the channel.
  while (r.Channels()[0].requests_done < 2) std::this_thread::yield();
  auto high = r.Copy({.src = hs.Ref(sys), .dst = hd.Ref(sys), .options = {.priority = 10}});
  REQUIRE(high.ok());
  REQUIRE(high->Wait().ok());
  for (Transfer& t : low) REQUIRE(t.Wait().ok());
  REQUIRE(high->chunks() == 4);
  const TransferTimes ht = high->times();
  // The next request dispatched after the high-priority transfer was
  // queued was its first (it waited only for requests already running)...
  CHECK(ht.dispatch_seq_at_first == ht.dispatch_seq_at_submit + 1);
  // ... and its four requests went out back to back.
  CHECK(ht.dispatch_seq_at_last == ht.dispatch_seq_at_first + 3);
  // Low-priority work was still waiting, and went on only afterwards.
  int overtaken = 0;
  for (Transfer& t : low) {
    const TransferTimes lt = t.times();
    CHECK_FALSE((lt.dispatch_seq_at_last > ht.dispatch_seq_at_submit &&
                 lt.dispatch_seq_at_last < ht.dispatch_seq_at_last));
    if (lt.dispatch_seq_at_last > ht.dispatch_seq_at_last) ++overtaken;
  }
  CHECK(overtaken >= 1);
  CHECK(CheckCopy(hs.shape, hs.bytes, hd.shape, hd.bytes, hd.before, hs.shape.bounds) == "");
}

TEST_CASE("cancellation frees every buffer and leaves other transfers intact") {
  RuntimeConfig c = SmallConfig(256 << 10);
  c.channels[0].rate_limit_bytes_per_s = 64 << 20;  // slow enough to cancel mid-way
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0");
  const InstanceShape shape{Box::FromExtents({4 << 20}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Buf a(shape, 1), ad(shape, 2), b({Box::FromExtents({1 << 14}), shape.fields, Layout::Aos(1)}, 3),
      bd({b.shape.bounds, shape.fields, Layout::Soa(1)}, 4);
  auto victim = r.Copy({.src = a.Ref(sys), .dst = ad.Ref(sys), .via = {{reg, Layout::Soa(1)}}});
  REQUIRE(victim.ok());
  auto other = r.Copy({.src = b.Ref(sys), .dst = bd.Ref(sys), .via = {{reg, Layout::Aos(1)}}});
  REQUIRE(other.ok());
  while (r.Channels()[0].requests_done < 4) std::this_thread::yield();
  victim->Cancel();
  const Status s = victim->Wait();
  CHECK(absl::IsCancelled(s));
  REQUIRE(other->Wait().ok());
  CHECK(CheckCopy(b.shape, b.bytes, bd.shape, bd.bytes, bd.before, b.shape.bounds) == "");
  CHECK(StagingUsed(r) == 0);
  CHECK(r.Stats().transfers_cancelled == 1);
  victim->Cancel();  // cancelling a finished transfer changes nothing
  CHECK(absl::IsCancelled(victim->Wait()));
}

TEST_CASE("an injected channel error fails its transfer, frees its buffers, spares others") {
  auto maker = [](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
    ISO_ASSIGN_OR_RETURN(auto inner, MakeChannel(cc));
    return std::unique_ptr<Channel>(new FaultyChannel(std::move(inner), cc.name == "up" ? 5 : 0));
  };
  RuntimeConfig c = SmallConfig(128 << 10);
  ChannelConfig up = c.channels[0], rest = c.channels[0];
  up.name = "up";
  up.edges = {{"sys0", "reg0"}};
  rest.name = "rest";
  rest.edges = {{"reg0", "sys0"}, {"sys0", "sys0"}, {"zcm0", "sys0"}, {"sys0", "zcm0"}};
  c.channels = {up, rest};
  auto rt = Runtime::Create(c, maker);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0"), zcm = Mem(r, "zcm0");
  const InstanceShape shape{Box::FromExtents({1 << 18}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  Buf a(shape, 1), ad({shape.bounds, shape.fields, Layout::Soa(1)}, 2);
  Buf b(shape, 3), bd({shape.bounds, shape.fields, Layout::Soa(1)}, 4);
  auto failing = r.Copy({.src = a.Ref(sys), .dst = ad.Ref(sys), .via = {{reg, Layout::Aos(1)}}});
  auto healthy = r.Copy({.src = b.Ref(sys), .dst = bd.Ref(sys), .via = {{zcm, Layout::Soa(1)}}});
  REQUIRE(failing.ok());
  REQUIRE(healthy.ok());
  const Status s = failing->Wait();
  REQUIRE(absl::IsInternal(s));
  CHECK_THAT(std::string(s.message()), Catch::Contains("injected I/O error"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("channel 'up'"));
  CHECK_THAT(std::string(s.message()), Catch::Contains("sys0 -> reg0"));
  REQUIRE(healthy->Wait().ok());
  CHECK(CheckCopy(b.shape, b.bytes, bd.shape, bd.bytes, bd.before, shape.bounds) == "");
  CHECK(StagingUsed(r) == 0);
  // The channel keeps serving after the failure.
  Buf e(shape, 5), ed(shape, 6);
  auto again = r.Copy({.src = e.Ref(sys), .dst = ed.Ref(sys), .via = {{reg, Layout::Aos(1)}}});
  REQUIRE(again.ok());
  REQUIRE(again->Wait().ok());
  CHECK(CheckCopy(e.shape, e.bytes, ed.shape, ed.bytes, ed.before, shape.bounds) == "");
  CHECK(r.Stats().transfers_failed == 1);
}

TEST_CASE("transfers that do not fit the staging budget wait, then all complete") {
  RuntimeConfig c = SmallConfig(128 << 10);
  c.memories[1].staging_bytes = 128 << 10;  // exactly one transfer's buffer in reg0
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0");
  const InstanceShape shape{Box::FromExtents({1 << 17}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  std::vector<std::unique_ptr<Buf>> bufs;
  std::vector<Transfer> ts;
  for (int i = 0; i < 6; ++i) {
    Buf* s = bufs.emplace_back(std::make_unique<Buf>(shape, i)).get();
    Buf* d =
        bufs.emplace_back(std::make_unique<Buf>(
                              InstanceShape{shape.bounds, shape.fields, Layout::Soa(1)}, 50 + i))
            .get();
    auto t = r.Copy({.src = s->Ref(sys), .dst = d->Ref(sys), .via = {{reg, Layout::Soa(1)}}});
    REQUIRE(t.ok());
    ts.push_back(*t);
  }
  for (size_t i = 0; i < ts.size(); ++i) {
    REQUIRE(ts[i].Wait().ok());
    const Buf& s = *bufs[2 * i];
    const Buf& d = *bufs[2 * i + 1];
    CHECK(CheckCopy(s.shape, s.bytes, d.shape, d.bytes, d.before, shape.bounds) == "");
  }
  CHECK(r.Memories()[1].staging_peak <= (128u << 10));
  CHECK(r.Stats().transfers_waiting_for_buffers == 6);
  CHECK(StagingUsed(r) == 0);
}

TEST_CASE("many threads submitting at once all get correct copies") {
  auto rt = Runtime::Create(SmallConfig(1 << 20));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), zcm = Mem(r, "zcm0");
  std::atomic<int> failures{0};
  std::vector<std::thread> threads;
  threads.reserve(8);
  for (int th = 0; th < 8; ++th) {
    threads.emplace_back([&, th] {
      std::mt19937_64 rng(static_cast<uint64_t>(th));
      for (int i = 0; i < 12; ++i) {
        const Box bounds = RandomBounds(rng, 2, 200);
        const FieldSpace fs = RandomFields(rng, 4);
        Buf s({bounds, fs, RandomLayout(rng, bounds)}, static_cast<uint64_t>(th * 100 + i));
        Buf d({bounds, fs, RandomLayout(rng, bounds)}, 7);
        std::vector<HopSpec> via;
        if (i % 2) via.push_back({zcm, Layout::Aos(2)});
        auto t = r.Copy(
            {.src = s.Ref(sys), .dst = d.Ref(sys), .options = {.priority = i % 3}, .via = via});
        if (!t.ok() || !t->Wait().ok() ||
            CheckCopy(s.shape, s.bytes, d.shape, d.bytes, d.before, bounds) != "") {
          ++failures;
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  CHECK(failures == 0);
  CHECK(r.Stats().transfers_completed == 96);
}

TEST_CASE("bad requests are rejected with a clear message and change nothing") {
  RuntimeConfig c = SmallConfig(64 << 10);
  c.memories[2].staging_bytes = 4096;
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), zcm = Mem(r, "zcm0");
  const InstanceShape shape{Box::FromExtents({1000}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Buf s(shape, 1), d(shape, 2);
  auto error_of = [&](CopyRequest req) {
    auto t = r.Copy(std::move(req));
    return t.ok() ? std::string("accepted") : std::string(t.status().message());
  };
  InstanceRef small = d.Ref(sys);
  small.capacity = 100;
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = small}), Catch::Contains("buffer holds 100"));
  InstanceRef null = d.Ref(sys);
  null.base = nullptr;
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = null}), Catch::Contains("null"));
  CHECK_THAT(error_of({.src = s.Ref({0, 42}), .dst = d.Ref(sys)}),
             Catch::Contains("unknown memory"));
  Box outside = Box::FromExtents({1001});
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = d.Ref(sys), .box = outside}),
             Catch::Contains("outside the source"));
  Box flat = Box::FromExtents({10, 10});  // issue #21: a dimension mismatch, not "outside"
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = d.Ref(sys), .box = flat}),
             Catch::Contains("has 2 dimension(s) but the instances have 1"));
  InstanceRef other_fields = d.Ref(sys);
  other_fields.shape.fields = FieldSpace::Uniform(1, 8);
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = other_fields}),
             Catch::Contains("field spaces differ"));
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = s.Ref(sys)}), Catch::Contains("overlap"));
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = d.Ref(sys), .via = {{zcm, Layout::Soa(1)}}}),
             Catch::Contains("budget is 4096"));
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = d.Ref(sys), .via = {{zcm, Layout::Soa(2)}}}),
             Catch::Contains("dimension"));
  InstanceRef bad_layout = d.Ref(sys);
  bad_layout.shape.layout = Layout::Aos(2);
  CHECK_THAT(error_of({.src = s.Ref(sys), .dst = bad_layout}), Catch::Contains("dimension"));
  CHECK(r.Stats().transfers_submitted == 0);
  CHECK(StagingUsed(r) == 0);
  CHECK(d.bytes == d.before);
}

TEST_CASE("destroying the runtime cancels transfers still running") {
  RuntimeConfig c = SmallConfig(256 << 10);
  c.channels[0].rate_limit_bytes_per_s = 32 << 20;
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  const MemoryId sys = Mem(**rt, "sys0");
  const InstanceShape shape{Box::FromExtents({8 << 20}), FieldSpace::Uniform(1, 4), Layout::Aos(1)};
  Buf s(shape, 1), d(shape, 2);
  auto t = (*rt)->Copy({.src = s.Ref(sys), .dst = d.Ref(sys)});
  REQUIRE(t.ok());
  rt->reset();
  CHECK(absl::IsCancelled(t->Wait()));
}

TEST_CASE("an empty box completes at once") {
  auto rt = Runtime::Create(DefaultRuntimeConfig());
  REQUIRE(rt.ok());
  const MemoryId sys = Mem(**rt, "sys0");
  const InstanceShape shape{Box::FromExtents({10}), FieldSpace::Uniform(1, 4), Layout::Aos(1)};
  Buf s(shape, 1), d(shape, 2);
  Box empty = shape.bounds;
  empty.hi[0] = 3;
  empty.lo[0] = 3;
  auto t = (*rt)->Copy({.src = s.Ref(sys), .dst = d.Ref(sys), .box = empty});
  REQUIRE(t.ok());
  CHECK(t->Wait().ok());
  CHECK(d.bytes == d.before);
}

TEST_CASE("small direct copies run inline on the submitting thread; capped channels never do") {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.inline_bytes = 64 << 10;
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  const MemoryId sys = Mem(**rt, "sys0");
  const InstanceShape small{Box::FromExtents({512}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Buf s(small, 1), d({small.bounds, small.fields, Layout::Soa(1)}, 2);
  std::thread::id ran_on;
  auto t = (*rt)->Copy({.src = s.Ref(sys), .dst = d.Ref(sys), .on_complete = [&](const Status&) {
                          ran_on = std::this_thread::get_id();
                        }});
  REQUIRE(t.ok());
  CHECK(t->Poll().has_value());  // already finished when Copy returned
  CHECK(ran_on == std::this_thread::get_id());
  CHECK(CheckCopy(s.shape, s.bytes, d.shape, d.bytes, d.before, small.bounds) == "");
  CHECK((*rt)->Stats().transfers_inline == 1);
  // Larger than inline_bytes: scheduled as usual.
  const InstanceShape big{Box::FromExtents({1 << 14}), FieldSpace::Uniform(2, 4), Layout::Aos(1)};
  Buf bs(big, 3), bd(big, 4);
  auto u = (*rt)->Copy({.src = bs.Ref(sys), .dst = bd.Ref(sys)});
  REQUIRE(u.ok());
  REQUIRE(u->Wait().ok());
  CHECK((*rt)->Stats().transfers_inline == 1);
  // A rate cap paces every byte: no inline path there.
  c.channels[0].rate_limit_bytes_per_s = 1 << 30;
  auto capped = Runtime::Create(c);
  REQUIRE(capped.ok());
  Buf cs(small, 5), cd(small, 6);
  auto v = (*capped)->Copy({.src = cs.Ref(sys), .dst = cd.Ref(sys)});
  REQUIRE(v.ok());
  REQUIRE(v->Wait().ok());
  CHECK((*capped)->Stats().transfers_inline == 0);
}

TEST_CASE(
    "only a transfer larger than the streaming threshold (the last-level cache unless set) streams "
    "its stores, and matches") {
  std::atomic<int> streamed{0}, cached{0};
  RuntimeConfig c = DefaultRuntimeConfig();
  c.inline_bytes = 0;
  // As if the cache were 8 MiB: a machine's own can be hundreds of MiB,
  // and copies past it took a minute under the sanitizers.
  c.stream_above_bytes = 8 << 20;
  auto rt = Runtime::Create(c, [&](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
    ISO_ASSIGN_OR_RETURN(auto inner, MakeChannel(cc));
    return std::unique_ptr<Channel>(new StreamCountingChannel(std::move(inner), streamed, cached));
  });
  REQUIRE(rt.ok());
  const MemoryId sys = Mem(**rt, "sys0");
  const FieldSpace fs = FieldSpace::Uniform(2, 8);
  // Fields apart in both, x innermost: runs of one field along x, long
  // enough to stream.
  const int64_t rows = static_cast<int64_t>(c.stream_above_bytes / (uint64_t{64} * 16)) + 64;
  Buf src({Box::FromExtents({rows, 64}), fs, *Layout::Parse("x,F,y", 2)}, 1);
  Buf dst({src.shape.bounds, fs, *Layout::Parse("x,y,F", 2)}, 2);
  auto t = (*rt)->Copy({.src = src.Ref(sys), .dst = dst.Ref(sys)});
  REQUIRE(t.ok());
  REQUIRE(t->Wait().ok());
  CHECK(streamed > 0);
  CHECK(cached == 0);
  CHECK(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, src.shape.bounds) == "");

  streamed = 0;
  Buf small_src({Box::FromExtents({64, 64}), fs, Layout::Aos(2)}, 3);
  Buf small_dst({small_src.shape.bounds, fs, Layout::Soa(2)}, 4);
  auto u = (*rt)->Copy({.src = small_src.Ref(sys), .dst = small_dst.Ref(sys)});
  REQUIRE(u.ok());
  REQUIRE(u->Wait().ok());
  CHECK(streamed == 0);
  CHECK(cached > 0);
  CHECK(CheckCopy(small_src.shape, small_src.bytes, small_dst.shape, small_dst.bytes,
                  small_dst.before, small_src.shape.bounds) == "");
}

TEST_CASE("a forced path carries the model's prediction, with the smallest field as run unit") {
  auto rt = Runtime::Create(SmallConfig(32 << 20));
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0");
  const FieldSpace fs = FieldSpace::Uniform(8, 4);
  Buf src({Box::FromExtents({4096}), fs, Layout::Aos(1)}, 1);
  Buf dst({src.shape.bounds, fs, Layout::Soa(1)}, 2);
  auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys), .via = {{reg, Layout::Soa(1)}}});
  REQUIRE(t.ok());
  REQUIRE(t->Wait().ok());
  const Path& p = t->path();
  CHECK(p.algorithm == "explicit");
  REQUIRE(p.hop_bps.size() == 2);
  CHECK(p.predicted_bps > 0);
  // The converting hop (AOS -> SOA, nothing shared) at a 4-byte run.
  CHECK(p.hop_bps[0] == Approx(p.edges[0].tp.At(4)));
  // Both hops are this node's uncapped Memcpy hops: their times add up
  // (the shared-memory bound, planner/full_planner.h).
  CHECK(p.predicted_bps == Approx(1 / (1 / p.hop_bps[0] + 1 / p.hop_bps[1])));
  CHECK(p.predicted_bps < std::min(p.hop_bps[0], p.hop_bps[1]));
}

TEST_CASE("a one-hop copy of fewer requests than its channel has threads is cut per thread") {
  // memcpy0: two threads, 4 MiB requests.
  auto chunks_of = [](Runtime& r, int64_t entries) -> uint64_t {
    const MemoryId sys = Mem(r, "sys0");
    const FieldSpace fs = FieldSpace::Uniform(1, 8);
    Buf src({Box::FromExtents({entries}), fs, Layout::Aos(1)}, 1);
    Buf dst({src.shape.bounds, fs, Layout::Aos(1)}, 2);
    auto t = r.Copy({.src = src.Ref(sys), .dst = dst.Ref(sys)});
    REQUIRE(t.ok());
    REQUIRE(t->Wait().ok());
    CHECK(CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, src.shape.bounds) ==
          "");
    return t->chunks();
  };
  auto rt = Runtime::Create(DefaultRuntimeConfig());
  REQUIRE(rt.ok());
  CHECK(chunks_of(**rt, (2 << 20) / 8) == 2);    // 2 MiB: a chunk per thread
  CHECK(chunks_of(**rt, (6 << 20) / 8) == 2);    // 6 MiB: two of 3 MiB, not 4 + 2
  CHECK(chunks_of(**rt, (768 << 10) / 8) == 1);  // under 2 x 512 KiB: whole
  CHECK(chunks_of(**rt, (16 << 20) / 8) == 4);   // requests enough: the request size
  RuntimeConfig one = DefaultRuntimeConfig();
  one.channels[0].threads = 1;
  auto single = Runtime::Create(one);
  REQUIRE(single.ok());
  CHECK(chunks_of(**single, (2 << 20) / 8) == 1);
}

TEST_CASE("a cross-node part's ring holds four slots where they fit in its node's TH") {
  RuntimeConfig c;
  c.space_threshold = 32ull << 20;
  c.slots_per_buffer = 2;
  CHECK(CrossNodeSlots(c) == 4);
  // The initiator cut chunks for four slots of a TH like this node's.
  CHECK(CrossNodeSlotsFor(c, c.space_threshold / 4) == 4);
  // An initiator that cut for two slots (an older daemon): two fit, not four.
  CHECK(CrossNodeSlotsFor(c, 16ull << 20) == 2);
  // Slots as large as the TH: one, never none.
  CHECK(CrossNodeSlotsFor(c, 32ull << 20) == 1);
  CHECK(CrossNodeSlotsFor(c, 64ull << 20) == 1);
  // Smaller chunks than the cut allows never take more than the depth.
  CHECK(CrossNodeSlotsFor(c, 1ull << 20) == 4);
  // A deeper configured ring is kept.
  c.slots_per_buffer = 8;
  CHECK(CrossNodeSlots(c) == 8);
  CHECK(CrossNodeSlotsFor(c, 4ull << 20) == 8);
}

}  // namespace ISOMETRY_TEST_FILE
