// The express lane of the memcpy channel as the runtime drives it
// (docs/guides/qos.md, "How a channel is shared"): a small copy goes
// beyond max_in_flight while bulk requests hold every slot, and a class
// with nothing in flight is issued at the first completion. A small
// one-hop copy is issued by the thread that submits it when its DMA
// worker would pick it next, and the worker is not woken for it; a
// pipeline's next memcpy chunk goes from the thread whose request made it
// runnable.
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <string>
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
      submitters_.push_back(std::this_thread::get_id());
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
  // The thread that submitted each request, in submission order.
  std::vector<std::thread::id> submitters() {
    std::lock_guard lock(mu_);
    return submitters_;
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
  std::vector<std::thread::id> submitters_;
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
// through the DMA worker, in 1 MiB requests; `classes`, when given, in force.
struct Gated {
  explicit Gated(int slots, std::vector<QosClass> classes = {}) {
    auto maker = [this, slots](const ChannelConfig& cc) -> Result<std::unique_ptr<Channel>> {
      ISO_ASSIGN_OR_RETURN(auto inner, MakeChannel(cc));
      if (cc.name != "memcpy0") return inner;
      auto g = std::make_unique<GatedChannel>(std::move(inner), slots);
      gate = g.get();
      return std::unique_ptr<Channel>(std::move(g));
    };
    RuntimeConfig c = DefaultRuntimeConfig();
    c.inline_bytes = 0;
    c.channels[0].request_bytes = 1 << 20;
    auto made = Runtime::Create(c, maker);
    REQUIRE(made.ok());
    REQUIRE(gate != nullptr);
    rt = *std::move(made);
    if (!classes.empty()) {
      QosConfig q;
      q.classes = std::move(classes);
      rt->SetQos(q);
    }
    sys = Mem(*rt, "sys0");
  }
  GatedChannel* gate = nullptr;
  std::unique_ptr<Runtime> rt;
  MemoryId sys;
};

// A source and a destination buffer of `elements` 4-byte entries; Check
// says whether the destination now holds the source ("" when it does).
struct Pair {
  Pair(int64_t elements, uint64_t seed)
      : shape{Box::FromExtents({elements}), FieldSpace::Uniform(1, 4), Layout::Aos(1)},
        src(shape, seed),
        dst(shape, seed + 1) {}
  std::string Check() const {
    return CheckCopy(src.shape, src.bytes, dst.shape, dst.bytes, dst.before, shape.bounds);
  }
  CopyRequest Copy(MemoryId m, std::string qos_class = "") {
    return {.src = src.Ref(m), .dst = dst.Ref(m), .qos_class = std::move(qos_class)};
  }
  InstanceShape shape;
  Buf src, dst;
};

// Context switches so far of this process's thread named `name` (/proc);
// -1 when there is none.
long SwitchesOf(const std::string& name) {
  for (const auto& task : std::filesystem::directory_iterator("/proc/self/task")) {
    std::ifstream comm(task.path() / "comm");
    std::string n;
    std::getline(comm, n);
    if (n != name) continue;
    std::ifstream status(task.path() / "status");
    long total = 0;
    for (std::string line; std::getline(status, line);) {
      if (line.find("ctxt_switches:") != std::string::npos) {
        total += std::stol(line.substr(line.find(':') + 1));
      }
    }
    return total;
  }
  return -1;
}

}  // namespace

TEST_CASE("a small copy is issued by the submitting thread, without waking its worker") {
  Gated g(1);
  GatedChannel* gate = g.gate;
  Runtime& r = *g.rt;
  const MemoryId sys = g.sys;
  Pair bulk_ends(1 << 20, 1), small_ends(1 << 14, 3);  // 4 MiB, 64 KiB
  // Idle channel: the first small copy goes from here.
  auto first = r.Copy(small_ends.Copy(sys));
  REQUIRE(first.ok());
  REQUIRE(first->Wait().ok());
  REQUIRE(gate->submitters().size() == 1);
  CHECK(gate->submitters()[0] == std::this_thread::get_id());
  CHECK(small_ends.Check() == "");
  // A bulk copy holds the channel's one slot: small copies go on the
  // express lane, still from here, and its worker sleeps through them
  // (one wake-up a copy before: the admission, then the completion).
  auto bulk = r.Copy(bulk_ends.Copy(sys));
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() == 1; });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // the worker back asleep
  const long switches_before = SwitchesOf("dma:memcpy0");
  const size_t submitted_before = gate->submitters().size();
  constexpr int kCopies = 60;
  bool all_ok = true;
  for (int i = 0; i < kCopies; ++i) {
    auto small = r.Copy(small_ends.Copy(sys));
    all_ok = all_ok && small.ok() && small->Wait().ok();
  }
  const long switches = SwitchesOf("dma:memcpy0") - switches_before;
  const std::vector<std::thread::id> submitters = gate->submitters();
  const int held_then = gate->held();
  gate->Release();
  CHECK(all_ok);
  CHECK(held_then == 1);  // the bulk request held its slot throughout
  REQUIRE(switches_before >= 0);
  INFO("the DMA worker switched " << switches << " times over " << kCopies << " small copies");
  CHECK(switches < kCopies / 4);
  REQUIRE(submitters.size() == submitted_before + kCopies);
  for (size_t i = submitted_before; i < submitters.size(); ++i) {
    CHECK(submitters[i] == std::this_thread::get_id());
  }
  REQUIRE(bulk->Wait().ok());
  CHECK(bulk_ends.Check() == "");
  CHECK(small_ends.Check() == "");
}

TEST_CASE("a small copy its class's cap holds back goes from the worker, when the cap allows") {
  QosClass capped{.name = "capped", .weight = 1};
  capped.caps[ChannelKind::kMemcpy].in_flight = 1;
  Gated g(4, {capped});
  GatedChannel* gate = g.gate;
  Runtime& r = *g.rt;
  const MemoryId sys = g.sys;
  Pair bulk_ends(1 << 20, 1), small_ends(1 << 12, 3);
  auto bulk = r.Copy(bulk_ends.Copy(sys, "capped"));
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() == 1; });
  // The class's one request in flight is the bulk one: the small copy
  // waits in the pool, and its worker issues it once the slot is back.
  auto small = r.Copy(small_ends.Copy(sys, "capped"));
  REQUIRE(small.ok());
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  const bool waited = !small->Poll().has_value();
  const size_t before = gate->submitters().size();
  gate->Release();
  CHECK(waited);
  CHECK(before == 1);
  REQUIRE(small->Wait().ok());
  REQUIRE(bulk->Wait().ok());
  const std::vector<std::thread::id> submitters = gate->submitters();
  REQUIRE(submitters.size() >= 2);
  CHECK(submitters[0] != std::this_thread::get_id());  // the bulk copy's first chunk: the worker
  CHECK(submitters[1] != std::this_thread::get_id());  // the small copy, after it
  CHECK(small_ends.Check() == "");
  CHECK(bulk_ends.Check() == "");
}

TEST_CASE("a small copy takes the express lane while bulk requests hold every slot") {
  Gated g(1);
  GatedChannel* gate = g.gate;
  Runtime& r = *g.rt;
  const MemoryId sys = g.sys;
  Pair bulk_ends(1 << 20, 1), small_ends(1 << 14, 3);
  auto bulk = r.Copy(bulk_ends.Copy(sys));
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() > 0; });
  if (gate->held() != 1) gate->Release();
  REQUIRE(gate->held() == 1);  // the channel's one slot
  // 64 KiB: beyond max_in_flight, on the express lane; it ends while the
  // bulk copy's first request still holds the slot.
  auto small = r.Copy(small_ends.Copy(sys));
  REQUIRE(small.ok());
  WaitUntil([&] { return small->Poll().has_value(); });
  const bool small_ended_first = small->Poll().has_value();
  const int held_then = gate->held();
  gate->Release();  // before any check: the runtime waits for held requests when destroyed
  CHECK(small_ended_first);
  CHECK(held_then == 1);
  CHECK(small->Wait().ok());
  CHECK(small_ends.Check() == "");
  REQUIRE(bulk->Wait().ok());
  CHECK(bulk_ends.Check() == "");
}

TEST_CASE("a class with nothing in flight is issued at the first completion, not at half") {
  Gated g(4, {{.name = "fg", .weight = 3}, {.name = "bg", .weight = 1}});
  GatedChannel* gate = g.gate;
  Runtime& r = *g.rt;
  const MemoryId sys = g.sys;
  Pair bulk_ends(1 << 21, 1);  // 8 MiB: eight requests
  Pair one(1 << 18, 3);        // 1 MiB: one request, above the express lane
  auto bulk = r.Copy(bulk_ends.Copy(sys, "bg"));
  REQUIRE(bulk.ok());
  WaitUntil([&] { return gate->held() == 4; });
  auto fg = r.Copy(one.Copy(sys, "fg"));
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
  CHECK(one.Check() == "");
  CHECK(bulk_ends.Check() == "");
}

}  // namespace ISOMETRY_TEST_FILE

namespace ISOMETRY_TEST_FILE {

TEST_CASE("a memcpy pipeline's next chunks go from the copy threads, not woken workers") {
  RuntimeConfig c = DefaultRuntimeConfig();
  c.inline_bytes = 0;
  ChannelConfig up = c.channels[0], down = c.channels[0];
  up.name = "up";
  up.edges = {{"sys0", "reg0"}};
  down.name = "down";
  down.edges = {{"reg0", "sys0"}};
  up.threads = down.threads = 1;
  up.request_bytes = down.request_bytes = 64 << 10;
  c.channels = {up, down};
  // Slots of 64 KiB: a pipeline of memcpy hops is cut into chunks of up to
  // a slot (TH / slots_per_buffer), not of the channels' request size.
  c.space_threshold = static_cast<uint64_t>(c.slots_per_buffer) * (64 << 10);
  auto rt = Runtime::Create(c);
  REQUIRE(rt.ok());
  Runtime& r = **rt;
  const MemoryId sys = Mem(r, "sys0"), reg = Mem(r, "reg0");
  Pair ends(1 << 21, 5);  // 8 MiB: 128 chunks a hop
  CopyRequest req = ends.Copy(sys);
  req.via = {{reg, ends.shape.layout}};
  REQUIRE(r.Copy(CopyRequest(req)).ok());  // the threads started, the programs compiled
  const long before = SwitchesOf("dma:up") + SwitchesOf("dma:down");
  auto t = r.Copy(std::move(req));
  REQUIRE(t.ok());
  REQUIRE(t->Wait().ok());
  const long switches = SwitchesOf("dma:up") + SwitchesOf("dma:down") - before;
  CHECK(t->chunks() == 128);
  INFO("the two DMA workers switched " << switches << " times over 128 chunks a hop");
  // Woken for each chunk, each worker switched at least once a chunk.
  CHECK(switches < 64);
  CHECK(ends.Check() == "");
}

}  // namespace ISOMETRY_TEST_FILE
