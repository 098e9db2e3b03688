// The express lane of the memcpy channel as the runtime drives it
// (docs/guides/qos.md, "How a channel is shared"): a small copy goes
// beyond max_in_flight while bulk requests hold every slot, and a class
// with nothing in flight is issued at the first completion.
#include <catch2/catch.hpp>
#include <chrono>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "channels/channel_factory.h"
#include "daemon/runtime/runtime.h"
#include "unit/runtime_test_util.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// Wraps the real channel with `slots` requests in flight: requests above
// the express lane's size wait until released; small ones go straight
// through. Records the class of every request, in submission order.
class GatedChannel final : public Channel {
 public:
  GatedChannel(std::unique_ptr<Channel> inner, int slots)
      : inner_(std::move(inner)), caps_(inner_->caps()) {
    caps_.max_in_flight = slots;
  }
  const ChannelCaps& caps() const override { return caps_; }
  void Submit(ChannelRequest req, RequestDone done) override {
    {
      std::lock_guard lock(mu_);
      classes_.push_back(req.qos_class);
      if (req.program->bytes > kExpressRequestBytes && !released_) {
        held_.emplace_back(std::move(req), std::move(done));
        return;
      }
    }
    inner_->Submit(std::move(req), std::move(done));
  }
  int held() {
    std::lock_guard lock(mu_);
    return static_cast<int>(held_.size());
  }
  std::vector<uint32_t> classes() {
    std::lock_guard lock(mu_);
    return classes_;
  }
  // Runs the oldest held request.
  void ReleaseOne() {
    std::pair<ChannelRequest, RequestDone> one;
    {
      std::lock_guard lock(mu_);
      if (held_.empty()) return;
      one = std::move(held_.front());
      held_.erase(held_.begin());
    }
    inner_->Submit(std::move(one.first), std::move(one.second));
  }
  void Release() {
    std::vector<std::pair<ChannelRequest, RequestDone>> held;
    {
      std::lock_guard lock(mu_);
      released_ = true;
      held.swap(held_);
    }
    for (auto& [req, done] : held) inner_->Submit(std::move(req), std::move(done));
  }

 private:
  std::unique_ptr<Channel> inner_;
  ChannelCaps caps_;
  std::mutex mu_;
  bool released_ = false;
  std::vector<std::pair<ChannelRequest, RequestDone>> held_;
  std::vector<uint32_t> classes_;
};

// Waits up to 20 s for `pred`.
template <class Pred>
bool WaitUntil(Pred pred) {
  for (int i = 0; i < 20000 && !pred(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return pred();
}

// A runtime whose memcpy0 is a GatedChannel of `slots`; every copy goes
// through the DMA worker, in 1 MiB requests.
Result<std::unique_ptr<Runtime>> GatedRuntime(int slots, GatedChannel*& gate) {
  auto maker = [&gate, slots](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
    ISO_ASSIGN_OR_RETURN(auto inner, MakeChannel(cc));
    if (cc.name != "memcpy0") return inner;
    auto g = std::make_unique<GatedChannel>(std::move(inner), slots);
    gate = g.get();
    return std::unique_ptr<Channel>(std::move(g));
  };
  RuntimeConfig c = DefaultRuntimeConfig();
  c.inline_bytes = 0;
  c.channels[0].request_bytes = 1 << 20;
  return Runtime::Create(c, maker);
}

}  // namespace

TEST_CASE("a small copy takes the express lane while bulk requests hold every slot") {
  GatedChannel* gate = nullptr;
  auto rt = GatedRuntime(1, gate);
  REQUIRE(rt.ok());
  REQUIRE(gate != nullptr);
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0");
  const InstanceShape bulk_shape{Box::FromExtents({1 << 20}), FieldSpace::Uniform(1, 4),
                                 Layout::Aos(1)};
  const InstanceShape small_shape{Box::FromExtents({1 << 14}), FieldSpace::Uniform(1, 4),
                                  Layout::Aos(1)};
  Buf bs(bulk_shape, 1), bd(bulk_shape, 2), ss(small_shape, 3), sd(small_shape, 4);
  auto bulk = r.Copy({.src = bs.Ref(sys), .dst = bd.Ref(sys)});
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() > 0; });
  if (gate->held() != 1) gate->Release();
  REQUIRE(gate->held() == 1);  // the channel's one slot
  // 64 KiB: beyond max_in_flight, on the express lane; it ends while the
  // bulk copy's first request still holds the slot.
  auto small = r.Copy({.src = ss.Ref(sys), .dst = sd.Ref(sys)});
  REQUIRE(small.ok());
  WaitUntil([&] { return small->Poll().has_value(); });
  const bool small_ended_first = small->Poll().has_value();
  const int held_then = gate->held();
  gate->Release();  // before any check: the runtime waits for held requests when destroyed
  CHECK(small_ended_first);
  CHECK(held_then == 1);
  CHECK(small->Wait().ok());
  CHECK(CheckCopy(ss.shape, ss.bytes, sd.shape, sd.bytes, sd.before, small_shape.bounds) == "");
  REQUIRE(bulk->Wait().ok());
  CHECK(CheckCopy(bs.shape, bs.bytes, bd.shape, bd.bytes, bd.before, bulk_shape.bounds) == "");
}

TEST_CASE("a class with nothing in flight is issued at the first completion, not at half") {
  GatedChannel* gate = nullptr;
  auto rt = GatedRuntime(4, gate);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  QosConfig q;
  q.classes = {{.name = "fg", .weight = 3}, {.name = "bg", .weight = 1}};
  r.SetQos(q);
  const MemoryId sys = Mem(r, "sys0");
  const InstanceShape bulk_shape{Box::FromExtents({1 << 21}), FieldSpace::Uniform(1, 4),
                                 Layout::Aos(1)};  // 8 MiB: eight requests
  const InstanceShape one_shape{Box::FromExtents({1 << 18}), FieldSpace::Uniform(1, 4),
                                Layout::Aos(1)};  // 1 MiB: one request, above the express lane
  Buf bs(bulk_shape, 1), bd(bulk_shape, 2), fs(one_shape, 3), fd(one_shape, 4);
  auto bulk = r.Copy({.src = bs.Ref(sys), .dst = bd.Ref(sys), .qos_class = "bg"});
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() == 4; });
  auto fg = r.Copy({.src = fs.Ref(sys), .dst = fd.Ref(sys), .qos_class = "fg"});
  REQUIRE(fg.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const size_t before = gate->classes().size();  // every slot held: fg waits
  gate->ReleaseOne();                            // one bg request ends
  WaitUntil([&] { return gate->classes().size() > before; });
  const std::vector<uint32_t> classes = gate->classes();
  gate->Release();
  CHECK(before == 4);
  REQUIRE(classes.size() > before);
  CHECK(classes[before] != classes[0]);  // fg's, not bg's next
  REQUIRE(fg->Wait().ok());
  REQUIRE(bulk->Wait().ok());
  CHECK(CheckCopy(fs.shape, fs.bytes, fd.shape, fd.bytes, fd.before, one_shape.bounds) == "");
  CHECK(CheckCopy(bs.shape, bs.bytes, bd.shape, bd.bytes, bd.before, bulk_shape.bounds) == "");
}

}  // namespace ISOMETRY_TEST_FILE
