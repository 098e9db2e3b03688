// The channel factory and request endpoints: every kind is reported, a
// kind without a backend or without what it needs is refused with a reason,
// and a channel handed an endpoint it cannot reach fails that request
// cleanly and keeps serving.
#include "channels/channel_factory.h"

#include <catch2/catch.hpp>
#include <future>
#include <set>
#include <vector>

#include "layout/copy_program.h"
#include "planner/testing/synthetic_graphs.h"
#ifdef ISOMETRY_HAVE_CUDA
#include "channels/cuda/cuda_probe.h"
#endif
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <sstream>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

namespace {

Status Run(Channel& c, ChannelRequest r) {
  std::promise<Status> done;
  auto f = done.get_future();
  c.Submit(std::move(r), [&](Status s) { done.set_value(std::move(s)); });
  return f.get();
}

}  // namespace

TEST_CASE("the probe reports every channel kind, with a reason for each absent one") {
  const auto found = ProbeChannels({});
  std::set<ChannelKind> kinds;
  for (const ChannelAvailability& a : found) {
    kinds.insert(a.kind);
    CHECK_FALSE(a.detail.empty());
  }
  for (ChannelKind k : {ChannelKind::kMemcpy, ChannelKind::kCma, ChannelKind::kGpuRead,
                        ChannelKind::kGpuWrite, ChannelKind::kGpuCopy, ChannelKind::kDiskRead,
                        ChannelKind::kDiskWrite, ChannelKind::kRemoteMemcpy}) {
    CHECK(kinds.count(k) == 1);
  }
  for (const ChannelAvailability& a : found) {
    if (a.kind == ChannelKind::kMemcpy) CHECK(a.available);
    // Without a data plane there is no network channel.
    if (a.kind == ChannelKind::kRemoteMemcpy) {
      CHECK_FALSE(a.available);
      CHECK_THAT(a.detail, Catch::Contains("peer"));
    }
  }
}

TEST_CASE("every kind has one descriptor, in ChannelKind order, agreeing with core's vocabulary") {
  const std::vector<const ChannelBackend*> backends = ChannelBackends();
  REQUIRE(backends.size() == static_cast<size_t>(ChannelKind::kRemoteMemcpy) + 1);
  for (size_t k = 0; k < backends.size(); ++k) {
    const ChannelBackend& b = *backends[k];
    const auto kind = static_cast<ChannelKind>(k);
    CHECK(b.kind == kind);
    CHECK(FindBackend(kind) == &b);
    // The wire and config spelling (core/channel_kind.h), and what every
    // edge of the kind tells the planner.
    CHECK(b.name == ChannelKindName(kind));
    CHECK(EdgeTraitsOf(kind) == b.edge_traits);
    CHECK(PaperTraits(kind) == b.edge_traits);  // the planner tests' graphs
    CHECK(b.serves);
    CHECK(b.model);
    CHECK(b.probe);
  }
  // The network kind, made per peer, is the one whose hops leave the node:
  // the cluster cuts a cross-node path into stretches at those hops.
  const ChannelBackend& net = NetworkBackend();
  CHECK(net.per_peer);
  for (const ChannelBackend* b : ChannelBackends()) {
    CHECK(b->edge_traits.crosses_nodes == (b == &net));
    CHECK(b->per_peer == (b == &net));
  }
}

TEST_CASE("kinds this build lacks, or lacking what they need, are refused with the reason") {
  ChannelConfig c;
  c.name = "g";
  c.kind = ChannelKind::kGpuCopy;
  auto gpu = MakeChannel(c);
#ifdef ISOMETRY_HAVE_CUDA
  // The CUDA build refuses GPU channels only where the probe found no GPU.
  if (!cuda::CachedGpuProbe().gpus.empty()) {
    CHECK(gpu.ok());
  } else {
    REQUIRE_FALSE(gpu.ok());
    CHECK_THAT(std::string(gpu.status().message()), Catch::Contains("no GPU: "));
  }
#else
  REQUIRE_FALSE(gpu.ok());
  CHECK_THAT(std::string(gpu.status().message()), Catch::Contains("not available in this build"));
#endif

  c.name = "tcp:b";
  c.kind = ChannelKind::kRemoteMemcpy;
  c.peer = "b";
  auto tcp = MakeChannel(c);
  REQUIRE_FALSE(tcp.ok());
  CHECK_THAT(std::string(tcp.status().message()), Catch::Contains("data plane"));
}

TEST_CASE("a memcpy channel copies host to host and refuses other endpoints") {
  ChannelConfig c;
  c.name = "m";
  c.kind = ChannelKind::kMemcpy;
  c.threads = 1;
  auto ch = MakeChannel(c);
  REQUIRE(ch.ok());
  std::vector<std::byte> a(64, std::byte{7}), b(64);
  REQUIRE(Run(**ch, {ContiguousProgram(64), HostBytes{a.data()}, HostBytes{b.data()}}).ok());
  CHECK(a == b);

  Status s =
      Run(**ch, {ContiguousProgram(64), FileRange{.fd = 0, .path = "x"}, HostBytes{b.data()}});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(std::string(s.message()),
             Catch::Contains("channel 'm' takes host memory as its source, not a file range"));
  s = Run(**ch, {ContiguousProgram(64), HostBytes{a.data()}, NetHalf{1, 2}});
  CHECK_THAT(std::string(s.message()), Catch::Contains("destination, not a network half"));
  // Still serving.
  std::vector<std::byte> d(64);
  REQUIRE(Run(**ch, {ContiguousProgram(64), HostBytes{a.data()}, HostBytes{d.data()}}).ok());
  CHECK(a == d);
}

// What an operator reads at start about GPUs: here, on a machine without
// a GPU (or a build without CUDA), that there is none and why.
TEST_CASE("the start log says whether there are GPU channels, and why not") {
  std::ostringstream text;
  auto sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(text);
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(std::make_shared<spdlog::logger>("capture", sink));
  LogChannelAvailability(ProbeChannels({}));
  spdlog::set_default_logger(previous);
  const std::string log = text.str();
  INFO(log);
  CHECK_THAT(log, Catch::Contains("GPU: "));
#ifdef ISOMETRY_HAVE_CUDA
  if (cuda::CachedGpuProbe().gpus.empty()) {
    CHECK_THAT(log, Catch::Contains("channel kind gpu_read: absent: no GPU: "));
    CHECK_THAT(log, Catch::Contains("GPU: no GPU: "));
  } else {
    CHECK_THAT(log, Catch::Contains("channel kind gpu_copy: available"));
    CHECK_THAT(log, Catch::Contains("gpu0 "));
  }
#else
  CHECK_THAT(log, Catch::Contains("GPU channels absent from this build: "));
#endif
}

}  // namespace ISOMETRY_TEST_FILE
