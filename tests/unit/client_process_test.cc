// The identity check the daemon makes before it reaches a client's
// process by CMA: same ids accepted, another uid (a child that setuid()s
// to nobody) refused, an exited process refused, /proc parsing.
#include "channels/cma/client_process.h"

#include <catch2/catch.hpp>

#include "unit/cma_child.h"
#include "unit/skip.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::CmaChild;

namespace {

std::string Message(const Status& s) { return std::string(s.message()); }

constexpr uid_t kNobody = 65534;

}  // namespace

TEST_CASE("a process of the client's own ids is accepted and pinned") {
  std::vector<std::byte> buffer(4096);
  CmaChild child(buffer.data(), buffer.size());
  auto p = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
  REQUIRE(p.ok());
  CHECK(p->pid() == child.pid());
  CHECK(p->pidfd() >= 0);
  CHECK(p->CheckAlive().ok());
  const ProcessBytes at = p->At(0x1000);
  CHECK(at.pid == child.pid());
  CHECK(at.address == 0x1000);
  CHECK(at.pidfd == p->pidfd());
}

TEST_CASE("a client claiming another uid or gid than the process has is refused") {
  std::vector<std::byte> buffer(4096);
  CmaChild child(buffer.data(), buffer.size());
  auto p = ClientProcess::Open({child.pid(), ::getuid() + 4242, ::getgid()});
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(Message(p.status()), Catch::Contains(StrCat("real uid is ", ::getuid())));
  p = ClientProcess::Open({child.pid(), ::getuid(), ::getgid() + 4242});
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(Message(p.status()), Catch::Contains("real gid is"));
}

TEST_CASE("a process that switched to another uid is refused for root", "[may_skip][other_uid]") {
  if (::geteuid() != 0) ISOMETRY_SKIP("needs root to make a child of another uid (setuid)");
  std::vector<std::byte> buffer(4096);
  CmaChild child(buffer.data(), buffer.size(), [] {
    if (::setgid(kNobody) != 0 || ::setuid(kNobody) != 0) ::_exit(3);
  });
  // A root client: the daemon would pass the kernel's check for it anyway,
  // but the process is not root's.
  auto p = ClientProcess::Open({child.pid(), 0, 0});
  REQUIRE_FALSE(p.ok());
  CHECK(p.status().code() == absl::StatusCode::kPermissionDenied);
  CHECK_THAT(Message(p.status()), Catch::Contains("real uid is 65534"));
  // Its own uid gets it.
  auto own = ClientProcess::Open({child.pid(), kNobody, kNobody});
  CHECK(own.ok());
}

TEST_CASE("a setuid-style process (saved uid differs) is refused", "[may_skip][saved_uid]") {
  if (::geteuid() != 0) ISOMETRY_SKIP("needs root to give a child mixed uids (setresuid)");
  std::vector<std::byte> buffer(4096);
  // Real and effective nobody, saved root: it can become root again.
  CmaChild child(buffer.data(), buffer.size(), [] {
    if (::setresgid(kNobody, kNobody, kNobody) != 0 || ::setresuid(kNobody, kNobody, 0) != 0) {
      ::_exit(3);
    }
  });
  auto p = ClientProcess::Open({child.pid(), kNobody, kNobody});
  REQUIRE_FALSE(p.ok());
  CHECK_THAT(Message(p.status()), Catch::Contains("saved uid is 0"));
}

TEST_CASE("an exited process is refused, reaped or not") {
  std::vector<std::byte> buffer(4096);
  {
    CmaChild child(buffer.data(), buffer.size());
    auto p = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
    REQUIRE(p.ok());
    child.Kill(/*reap=*/false);
    // A zombie: the pid is still its own, but the pidfd says it exited.
    for (int i = 0; i < 1000 && p->CheckAlive().ok(); ++i) ::usleep(1000);
    CHECK(p->CheckAlive().code() == absl::StatusCode::kNotFound);
    auto zombie = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
    REQUIRE_FALSE(zombie.ok());
    CHECK(zombie.status().code() == absl::StatusCode::kNotFound);
    child.Reap();
    auto gone = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
    REQUIRE_FALSE(gone.ok());
    CHECK(gone.status().code() == absl::StatusCode::kNotFound);
  }
  CHECK(ClientProcess::Open({0, 0, 0}).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("an exiting process is told from a live one by its pidfd and PF_EXITING") {
  std::vector<std::byte> buffer(4096);
  CmaChild child(buffer.data(), buffer.size());
  auto p = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
  REQUIRE(p.ok());
  auto live = ProcessExiting(p->pid(), p->pidfd());
  REQUIRE(live.ok());
  CHECK_FALSE(*live);
  child.Kill(/*reap=*/false);
  bool exiting = false;
  for (int i = 0; i < 1000 && !exiting; ++i) {
    auto r = ProcessExiting(p->pid(), p->pidfd());
    REQUIRE(r.ok());
    exiting = *r;
    if (!exiting) ::usleep(1000);
  }
  CHECK(exiting);
  child.Reap();
  auto reaped = ProcessExiting(p->pid(), p->pidfd());
  REQUIRE(reaped.ok());
  CHECK(*reaped);
}

TEST_CASE("/proc stat flags are field 9, counted from the name's last ')'") {
  auto plain = ParseProcStatFlags("42 (cat) R 1 42 42 0 -1 4194560 97 0 0 0\n");
  REQUIRE(plain.ok());
  CHECK(*plain == 4194560);
  // A name may hold spaces and ')' of its own.
  auto odd = ParseProcStatFlags("7 (a) b) c) S 1 7 7 0 -1 4194308 1 2\n");
  REQUIRE(odd.ok());
  CHECK(*odd == 4194308);
  CHECK((*odd & 0x4) != 0);
  CHECK_FALSE(ParseProcStatFlags("7 (x S 1 7").ok());
  CHECK_FALSE(ParseProcStatFlags("7 (x) S 1 7 7 0").ok());
  CHECK_FALSE(ParseProcStatFlags("7 (x) S 1 7 7 0 -1 zz 1").ok());
}

TEST_CASE("/proc status parsing takes the id and capability lines") {
  ProcessIds ids;
  const char* text =
      "Name:\tx\nUmask:\t0022\nState:\tS (sleeping)\nTgid:\t7\nUid:\t1000\t1001\t1002\t1003\n"
      "Gid:\t5\t6\t7\t8\nCapInh:\t0000000000000000\nCapPrm:\t0000000000002000\n"
      "CapEff:\t00000000000000ff\n";
  REQUIRE(ParseProcStatus(text, ids).ok());
  CHECK(ids.uid[0] == 1000);
  CHECK(ids.uid[3] == 1003);
  CHECK(ids.gid[1] == 6);
  CHECK(ids.cap_permitted == 0x2000);
  CHECK(ids.cap_effective == 0xff);
  CHECK_FALSE(ParseProcStatus("Uid:\t1\t2\t3\n", ids).ok());
  CHECK_FALSE(ParseProcStatus("Uid:\t1\t2\tx\t4\nGid:\t1\t2\t3\t4\n", ids).ok());
  // "XUid:" is not "Uid:".
  CHECK_FALSE(ParseProcStatus("XUid:\t1\t2\t3\t4\n", ids).ok());
}

}  // namespace ISOMETRY_TEST_FILE
