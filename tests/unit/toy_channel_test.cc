// A channel kind added by a test: its code and its descriptor are all in
// this file (the stand-in for a folder channels/toy/), and one
// registration stands in for its row in channel_factory.cc's table. The
// factory, the probe report and the local topology then make, report and
// model it like a built-in kind, without a line changed elsewhere
// (docs/development/adding-a-channel.md).
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <thread>
#include <vector>

#include "channels/channel_backend.h"
#include "channels/channel_edges.h"
#include "channels/channel_factory.h"
#include "daemon/runtime/local_topology.h"
#include "layout/copy_program.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

// A value past the built-in kinds: the toy's own.
constexpr ChannelKind kToyKind = static_cast<ChannelKind>(200);

// ---- what channels/toy/ would hold ----

// Copies contiguous programs between host buffers, on a thread per
// request (channel.h: `done` never runs inside Submit).
class ToyChannel final : public Channel {
 public:
  explicit ToyChannel(const ChannelConfig& config) {
    caps_.name = config.name;
    caps_.kind = kToyKind;
    caps_.memory_kinds = {{MemoryKind::kSys, MemoryKind::kSys}};
    caps_.request_bytes = config.request_bytes;
  }
  const ChannelCaps& caps() const override { return caps_; }
  void Submit(ChannelRequest r, RequestDone done) override {
    std::thread([r = std::move(r), done = std::move(done)] {
      const auto* src = std::get_if<HostBytes>(&r.src);
      const auto* dst = std::get_if<HostBytes>(&r.dst);
      if (!src || !dst) {
        done(FailedPrecondition("toy: host memory only"));
        return;
      }
      std::memcpy(dst->base, src->base, r.program->bytes);
      done(OkStatus());
    }).detach();
  }

 private:
  ChannelCaps caps_;
};

bool ToyServes(MemoryKind src, MemoryKind dst) {
  return src == MemoryKind::kSys && dst == MemoryKind::kSys;
}
EdgeRateModel ToyModel(MemoryKind, MemoryKind) { return {{2e9, 1e-6}, std::nullopt}; }
ChannelAvailability ToyProbe(ChannelKind kind, const ChannelContext&) {
  return KindAvailable(kind, "a toy: host copies on a thread per request");
}
Result<std::unique_ptr<Channel>> ToyMake(const ChannelConfig& c, const ChannelContext&) {
  return std::unique_ptr<Channel>(std::make_unique<ToyChannel>(c));
}

constexpr ChannelBackend kToyBackend{
    .kind = kToyKind,
    .name = "toy",
    .serves = ToyServes,
    .edge_traits = {.converts_layout = false},
    .model = ToyModel,
    .probe = ToyProbe,
    .make = ToyMake,
};

// ---- the test ----

ChannelConfig ToyConfig() {
  ChannelConfig c;
  c.name = "toy0";
  c.kind = kToyKind;
  c.edges = {{"a", "b"}};
  return c;
}

}  // namespace

TEST_CASE("a registered toy kind is made, probed and modelled like a built-in one") {
  REQUIRE(FindBackend(kToyKind) == nullptr);
  {
    const TestBackendRegistration row(kToyBackend);
    REQUIRE(FindBackend(kToyKind) == &kToyBackend);

    bool reported = false;
    for (const ChannelAvailability& a : ProbeChannels({})) {
      if (a.kind != kToyKind) continue;
      reported = true;
      CHECK(a.available);
      CHECK(a.detail == "a toy: host copies on a thread per request");
    }
    CHECK(reported);

    auto ch = MakeChannel(ToyConfig());
    REQUIRE(ch.ok());
    std::vector<std::byte> src(64, std::byte{5}), dst(64);
    std::promise<Status> done;
    (*ch)->Submit({ContiguousProgram(64), HostBytes{src.data()}, HostBytes{dst.data()}},
                  [&](Status s) { done.set_value(std::move(s)); });
    CHECK(done.get_future().get().ok());
    CHECK(src == dst);

    // The topology reads the toy's model and traits for its edge.
    RuntimeConfig config;
    config.memories = {{.name = "a", .kind = MemoryKind::kSys},
                       {.name = "b", .kind = MemoryKind::kSys}};
    config.channels = {ToyConfig()};
    const Topology topo = LocalTopology(config);
    REQUIRE(topo.edges.size() == 1);
    CHECK(topo.edges[0].kind == kToyKind);
    CHECK(topo.edges[0].tp.Peak() == Approx(2e9).epsilon(0.01));
    CHECK_FALSE(topo.edges[0].tp_contiguous);
    // And tells the planners what its descriptor says of its edges.
    CHECK(topo.edges[0].traits == kToyBackend.edge_traits);
    CHECK_FALSE(topo.edges[0].traits.converts_layout);

    // The config's edge checks ask the toy's descriptor too: without
    // written edges it serves every SYS pair, and nothing else.
    ChannelConfig by_kind = ToyConfig();
    by_kind.edges.clear();
    config.channels = {by_kind};
    config.memories.push_back({.name = "z", .kind = MemoryKind::kZcm});
    CHECK(CheckChannelKinds(config).ok());
    CHECK(ChannelEdges(config, by_kind) == std::vector<std::pair<std::string, std::string>>{
                                               {"a", "a"}, {"a", "b"}, {"b", "a"}, {"b", "b"}});
    config.channels[0].edges = {{"a", "z"}};
    CHECK_THAT(CheckChannelKinds(config).ToString(),
               Catch::Contains("channel 'toy0' (toy) cannot serve a -> z"));
  }
  // Gone with its registration: the factory refuses the kind again.
  CHECK(FindBackend(kToyKind) == nullptr);
  auto refused = MakeChannel(ToyConfig());
  REQUIRE_FALSE(refused.ok());
  CHECK_THAT(std::string(refused.status().message()),
             Catch::Contains("is not available in this build"));
}

}  // namespace ISOMETRY_TEST_FILE
