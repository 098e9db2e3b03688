// Copies submitted through the ring with their transfer id reported at
// acceptance (Client::SubmitTracked, ring::kFlagReportAccepted), against
// a real daemon: the id is the copy's, it cancels the copy while it runs,
// it comes first even for a copy that ends inside the daemon's Copy (an
// inline one), a CQ too full for the interim completion holds nothing
// back, and a ticket that is no tracked copy gets an error, never a hang.
// TrySubmit answers a full ring at once and queues nothing; WaitFor gives up
// at its timeout.
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <optional>
#include <vector>

#include "client/cpp/isometry_client.h"
#include "integration/client_helpers.h"
#include "integration/daemon_fixture.h"
#include "integration/stopped_process.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;

namespace {

// kOneMemory with a 16 MiB/s channel: a 64 MiB copy runs for four seconds.
const std::string kSlow = std::string(kOneMemory) + "rate_limit = \"16MiB\"\n";

// Copies up to 64 KiB on the uncapped channel take the inline path: they
// end inside Copies::Copy, before the ring thread knows their id.
const std::string kInline = std::string("[runtime]\ninline_bytes = \"64KiB\"\n") + kOneMemory;

InstanceShape Bytes1D(uint64_t n) {
  return {Box::FromExtents({static_cast<int64_t>(n)}), FieldSpace::Uniform(1, 1), Layout::Aos(1)};
}

// `n` pairs of 4 KiB instances, sources and destinations, their bytes
// seeded from `seed` on.
struct Pairs {
  std::vector<Placed> srcs, dsts;
};
Pairs PlacePairs(client::Client& c, int n, uint64_t seed) {
  Pairs p;
  p.srcs.reserve(n);
  p.dsts.reserve(n);
  for (uint64_t i = 0; i < static_cast<uint64_t>(n); ++i) {
    p.srcs.push_back(Place(c, Bytes1D(4096), seed + 2 * i));
    p.dsts.push_back(Place(c, Bytes1D(4096), seed + 2 * i + 1));
  }
  return p;
}

}  // namespace

TEST_CASE("a tracked copy reports its transfer id at acceptance, and the id cancels it") {
  Daemon d(kSlow);
  auto c = ConnectTo(d.local_socket(), "tracked");
  Placed big_src = Place(*c, Bytes1D(64 << 20), 1), big_dst = Place(*c, Bytes1D(64 << 20), 2);

  // A slow copy: its id is known while it runs (the cancel finds it
  // running), and cancels it.
  auto ticket = c->SubmitTracked(big_src.inst, big_dst.inst);
  REQUIRE(ticket.ok());
  auto id = c->TransferOf(*ticket);
  REQUIRE(id.ok());
  CHECK(*id > 0);
  CHECK(c->TransferOf(*ticket).value_or(0) == *id);  // asked again: the same
  CHECK(c->Cancel(*id).status.ok());
  const client::Completion cancelled = c->Wait(*ticket);
  CHECK(cancelled.transfer == *id);
  CHECK(absl::IsCancelled(cancelled.status));
  // Waited for: nothing more will answer for that ticket.
  CHECK(absl::IsFailedPrecondition(c->TransferOf(*ticket).status()));

  // A copy the daemon refuses (the source's index space does not fit the
  // destination): its refusal, from both.
  Placed small = Place(*c, Bytes1D(4096), 3);
  auto refused = c->SubmitTracked(big_src.inst, small.inst);
  REQUIRE(refused.ok());
  const Result<uint64_t> why = c->TransferOf(*refused);
  INFO(why.status().ToString());
  CHECK_FALSE(why.ok());
  const client::Completion refusal = c->Wait(*refused);
  CHECK(refusal.transfer == 0);
  CHECK(refusal.status.code() == why.status().code());
  CHECK(refusal.status.code() != absl::StatusCode::kOk);

  // A ticket of a plain Submit is no tracked copy: an error, not a hang.
  Placed small_dst = Place(*c, Bytes1D(4096), 4);
  auto plain = c->Submit(small.inst, small_dst.inst);
  REQUIRE(plain.ok());
  CHECK(absl::IsFailedPrecondition(c->TransferOf(*plain).status()));
  CHECK(c->Wait(*plain).status.ok());
  CHECK(absl::IsFailedPrecondition(c->TransferOf(12345678).status()));
  CHECK(d.Stop() == 0);
}

TEST_CASE("inline copies report their id before they end; a full CQ holds nothing back") {
  // Two completion slots: most tracked copies find none free for their
  // interim completion, and their own completion carries the id.
  Daemon d("cq_entries = 2\n" + kInline);
  auto c = ConnectTo(d.local_socket(), "inline");
  auto [srcs, dsts] = PlacePairs(*c, 8, 10);
  for (int round = 0; round < 50; ++round) {
    std::vector<uint64_t> tickets;
    for (size_t i = 0; i < srcs.size(); ++i) {
      auto t = c->SubmitTracked(srcs[i].inst, dsts[i].inst);
      REQUIRE(t.ok());
      tickets.push_back(*t);
    }
    for (uint64_t t : tickets) {
      const Result<uint64_t> id = c->TransferOf(t);
      REQUIRE(id.ok());
      const client::Completion done = c->Wait(t);
      REQUIRE(done.status.ok());
      CHECK(done.transfer == *id);
    }
  }
  for (size_t i = 0; i < srcs.size(); ++i) {
    CHECK(Bytes(dsts[i].alloc, 4096) == srcs[i].before);
  }
  // The daemon owes this client no completion: a plain copy goes through.
  Placed a = Place(*c, Bytes1D(4096), 30), b = Place(*c, Bytes1D(4096), 31);
  CHECK(c->Copy(a.inst, b.inst).status.ok());
  CHECK(d.Stop() == 0);
}

TEST_CASE("TrySubmit answers a full submission ring at once and queues nothing") {
  // A stopped daemon takes nothing off a ring of four entries.
  Daemon d("sq_entries = 4\n" + kInline);
  auto c = ConnectTo(d.local_socket(), "try");
  auto [srcs, dsts] = PlacePairs(*c, 5, 40);
  StopProcess(d.pid());
  // Resumed on the way out too, so a failed REQUIRE leaves no stopped daemon.
  struct Resume {
    pid_t pid;
    ~Resume() { kill(pid, SIGCONT); }
  } resume{d.pid()};
  std::vector<uint64_t> tickets;
  for (int i = 0; i < 4; ++i) {
    auto t = c->TrySubmit(srcs[i].inst, dsts[i].inst);
    REQUIRE(t.ok());
    tickets.push_back(*t);
  }
  const Result<uint64_t> full = c->TrySubmit(srcs[4].inst, dsts[4].inst);
  const Result<uint64_t> full_tracked = c->TrySubmit(srcs[4].inst, dsts[4].inst, {}, true);
  // Nothing completes while the daemon is stopped: WaitFor gives up, and
  // the ticket stays waitable.
  CHECK_FALSE(c->WaitFor(tickets[0], std::chrono::milliseconds(50)).has_value());
  REQUIRE(kill(d.pid(), SIGCONT) == 0);
  const std::optional<client::Completion> first =
      c->WaitFor(tickets[0], std::chrono::milliseconds(30000));
  REQUIRE(first.has_value());
  CHECK(first->status.ok());
  tickets.erase(tickets.begin());
  INFO(full.status().ToString());
  CHECK(absl::IsResourceExhausted(full.status()));
  CHECK(absl::IsResourceExhausted(full_tracked.status()));
  for (uint64_t t : tickets) CHECK(c->Wait(t).status.ok());
  for (int i = 0; i < 4; ++i) CHECK(Bytes(dsts[i].alloc, 4096) == srcs[i].before);
  // The refused one was not queued: its destination is untouched.
  CHECK(Bytes(dsts[4].alloc, 4096) == dsts[4].before);
  // With room again, a tracked TrySubmit has its id and completes.
  auto t = c->TrySubmit(srcs[4].inst, dsts[4].inst, {}, true);
  REQUIRE(t.ok());
  const Result<uint64_t> id = c->TransferOf(*t);
  REQUIRE(id.ok());
  const client::Completion done = c->Wait(*t);
  CHECK(done.status.ok());
  CHECK(done.transfer == *id);
  CHECK(Bytes(dsts[4].alloc, 4096) == srcs[4].before);
  CHECK(d.Stop() == 0);
}

}  // namespace ISOMETRY_TEST_FILE
