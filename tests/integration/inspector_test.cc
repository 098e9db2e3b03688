// The C++ client's Inspector against a real daemon: what `isoctl channels`,
// `isoctl transfers` and `isoctl explain` show, as calls a program makes
// (docs/guides/cpp.md, "C++ client").
#include "client/cpp/inspector.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using client::Elements;
using client::ExplainQuery;
using client::Inspector;

namespace {

std::unique_ptr<Inspector> Inspect(Daemon& d) {
  auto in = Inspector::Connect({.grpc_socket = d.grpc_socket()});
  REQUIRE(in.ok());
  return *std::move(in);
}

const FieldSpace kFields = *FieldSpace::Make({{"pos", 12}, {"id", 8}});
const Box kSpace = Box::FromExtents({300, 40});

}  // namespace

TEST_CASE("the Inspector lists the daemon's channels and the copies it runs") {
  // A slow channel, so the copy is still there to be listed.
  Daemon d(std::string(kOneMemory) + "rate_limit = \"4MiB\"\n");
  auto c = ConnectTo(d.local_socket(), "inspected");
  auto in = Inspect(d);

  auto channels = in->ListChannels();
  REQUIRE(channels.ok());
  auto memcpy0 =
      std::find_if(channels->begin(), channels->end(),
                   [](const client::ChannelSummary& ch) { return ch.name == "memcpy0"; });
  REQUIRE(memcpy0 != channels->end());
  CHECK(memcpy0->kind == "memcpy");
  CHECK(std::find(memcpy0->edges.begin(), memcpy0->edges.end(), "sys0->sys0") !=
        memcpy0->edges.end());
  CHECK(memcpy0->rate_limit_bytes_per_s == 4u << 20);
  const uint64_t bytes_before = memcpy0->bytes_done;

  const Box space = Box::FromExtents({1024, 200});  // 4 MiB: about a second at the limit
  Placed src = Place(*c, {space, kFields, Layout::Aos(2)}, 1);
  Placed dst = Place(*c, {space, kFields, Layout::Soa(2)}, 2);
  const Result<uint64_t> ticket = c->Submit(src.inst, dst.inst, /*priority=*/3);
  REQUIRE(ticket.ok());

  // The daemon takes the copy from the submission ring a moment later.
  Result<std::vector<client::TransferSummary>> transfers;
  for (int i = 0; i < 200; ++i) {
    transfers = in->ListTransfers();
    REQUIRE(transfers.ok());
    if (!transfers->empty()) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  REQUIRE(transfers->size() == 1);
  const client::TransferSummary& mine = transfers->front();
  CHECK((mine.state == "running" || mine.state == "waiting"));
  CHECK(mine.priority == 3);
  CHECK(mine.bytes == src.shape.total_bytes());
  CHECK(mine.path.find("memcpy0") != std::string::npos);

  const client::Completion done = c->Wait(*ticket);
  REQUIRE(done.status.ok());
  CHECK(done.transfer == mine.id);
  channels = in->ListChannels();
  REQUIRE(channels.ok());
  for (const client::ChannelSummary& ch : *channels) {
    if (ch.name == "memcpy0") {
      CHECK(ch.bytes_done >= bytes_before + src.shape.total_bytes());
    }
  }
  CHECK(d.Stop() == 0);
}

TEST_CASE("the Inspector explains the plan for layout and datatype ends, and refuses bad ones") {
  Daemon d(kOneMemory);
  auto in = Inspect(d);
  const InstanceShape aos{kSpace, kFields, Layout::Aos(2)};
  const InstanceShape soa{kSpace, kFields, Layout::Soa(2)};

  auto plan = in->Explain({.src_memory = "sys0", .dst_memory = "sys0", .src = aos, .dst = soa});
  REQUIRE(plan.ok());
  CHECK(!plan->algorithm.empty());
  REQUIRE(!plan->hops.empty());
  CHECK(plan->hops.front().channel == "memcpy0");
  CHECK(plan->chunks > 0);
  CHECK(plan->predicted_bytes_per_s > 0);
  CHECK(plan->text.find("memcpy0") != std::string::npos);

  // Elements of a datatype against a layout holding the same bytes.
  const Datatype bytes = Datatype::Basic(BasicType::kByte);
  const ExplainQuery typed{.src_memory = "sys0",
                           .dst_memory = "sys0",
                           .src = Elements{.type = bytes, .count = int64_t(aos.total_bytes())},
                           .dst = soa};
  auto typed_plan = in->Explain(typed);
  REQUIRE(typed_plan.ok());
  CHECK(!typed_plan->hops.empty());

  // Two layout ends over different index spaces: refused before sending.
  const InstanceShape other{Box::FromExtents({10, 40}), kFields, Layout::Soa(2)};
  auto mismatch =
      in->Explain({.src_memory = "sys0", .dst_memory = "sys0", .src = aos, .dst = other});
  CHECK(mismatch.status().code() == absl::StatusCode::kInvalidArgument);
  CHECK(std::string(mismatch.status().message()).find("different bounds or fields") !=
        std::string::npos);

  // A memory the daemon does not have: its own error, naming the memory.
  auto unknown =
      in->Explain({.src_memory = "nowhere", .dst_memory = "sys0", .src = aos, .dst = soa});
  REQUIRE(!unknown.ok());
  CHECK(std::string(unknown.status().message()).find("nowhere") != std::string::npos);
  CHECK(d.Stop() == 0);
}

TEST_CASE("an Inspector aimed at no daemon says which socket did not answer") {
  const auto start = std::chrono::steady_clock::now();
  auto in = Inspector::Connect({.grpc_socket = "/nonexistent/isometry-grpc.sock",
                                .timeout = std::chrono::milliseconds(300)});
  REQUIRE(!in.ok());
  CHECK(in.status().code() == absl::StatusCode::kUnavailable);
  CHECK(std::string(in.status().message()).find("/nonexistent/isometry-grpc.sock") !=
        std::string::npos);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(5));
}

}  // namespace ISOMETRY_TEST_FILE
