// The CMA channel against real child processes (fork) and the real
// process_vm_readv/writev: strided programs both ways, more runs than one
// call takes, resumption after short calls, a process that dies
// mid-request, cancellation, endpoints it refuses, and its calibration.
#include "channels/cma/cma_channel.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <numeric>

#include "channels/channel_factory.h"
#include "channels/cma/client_process.h"
#include "layout/executor.h"
#include "procmem/cma_copy.h"
#include "unit/cma_child.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::CmaChild;

namespace {

std::vector<std::byte> Pattern(size_t n, size_t seed) {
  std::vector<std::byte> v(n);
  for (size_t i = 0; i < n; ++i) {
    v[i] = static_cast<std::byte>((i * 131 + seed * 7 + i / 251) & 255);
  }
  return v;
}

uint64_t Neg(uint64_t v) { return ~v + 1; }

// A strided program over 64 KiB buffers: a 3-loop op walking the source
// backwards in its outer loop, a 2-loop op with a negative inner stride on
// the destination, and a plain contiguous op.
std::shared_ptr<const CopyProgram> StridedProgram() {
  auto p = std::make_shared<CopyProgram>();
  CopyOp a;
  a.src_offset = 40000;  // outer loop walks down from here
  a.dst_offset = 0;
  a.run_bytes = 24;
  a.num_loops = 3;
  a.loops[0] = {.count = 5, .src_stride = Neg(4000), .dst_stride = 2000};
  a.loops[1] = {.count = 7, .src_stride = 300, .dst_stride = 200};
  a.loops[2] = {.count = 3, .src_stride = 50, .dst_stride = 24};
  CopyOp b;
  b.src_offset = 45000;
  b.dst_offset = 30000;
  b.run_bytes = 100;
  b.num_loops = 2;
  b.loops[0] = {.count = 4, .src_stride = 1000, .dst_stride = 3000};
  b.loops[1] = {.count = 6, .src_stride = 128, .dst_stride = Neg(200)};
  CopyOp c;
  c.src_offset = 60000;
  c.dst_offset = 50000;
  c.run_bytes = 5000;
  for (const CopyOp& op : {a, b, c}) {
    p->ops.push_back(op);
    p->bytes += op.bytes();
    p->runs += op.runs();
  }
  return p;
}

std::shared_ptr<const CopyProgram> ManyRuns(uint64_t runs, uint64_t run, uint64_t stride) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = run;
  op.num_loops = 1;
  op.loops[0] = {.count = runs, .src_stride = stride, .dst_stride = stride};
  p->ops.push_back(op);
  p->bytes = op.bytes();
  p->runs = op.runs();
  return p;
}

std::unique_ptr<Channel> MakeCma(int threads = 2) {
  ChannelConfig c;
  c.name = "cma0";
  c.kind = ChannelKind::kCma;
  c.threads = threads;
  auto ch = MakeChannel(c);
  REQUIRE(ch.ok());
  return std::move(*ch);
}

Status Run(Channel& c, const ChannelRequest& r) {
  std::promise<Status> done;
  auto f = done.get_future();
  c.Submit(r, [&](Status s) { done.set_value(std::move(s)); });
  return f.get();
}

std::string Message(const Status& s) { return std::string(s.message()); }

// The test's wrappers of the real system call (CmaTarget::syscall).
struct Hook {
  uint64_t max_bytes = 0;  // > 0: each call moves at most this much
  int calls = 0;
  std::function<void(int)> before;  // runs before call n (from 1)
};
Hook* hook = nullptr;

// Calls the real process_vm_readv/writev on a prefix of the iovecs of at
// most hook->max_bytes (splitting iovecs), so short returns happen.
ssize_t Shortened(bool write, pid_t pid, const iovec* local, unsigned long lc, const iovec* remote,
                  unsigned long rc, unsigned long flags) {
  ++hook->calls;
  if (hook->before) hook->before(hook->calls);
  if (!hook->max_bytes) {
    return write ? ::process_vm_writev(pid, local, lc, remote, rc, flags)
                 : ::process_vm_readv(pid, local, lc, remote, rc, flags);
  }
  auto cut = [&](const iovec* v, unsigned long n) {
    std::vector<iovec> out;
    uint64_t left = hook->max_bytes;
    for (unsigned long i = 0; i < n && left > 0; ++i) {
      out.push_back({v[i].iov_base, std::min<uint64_t>(v[i].iov_len, left)});
      left -= out.back().iov_len;
    }
    return out;
  };
  const auto l = cut(local, lc), r = cut(remote, rc);
  return write ? ::process_vm_writev(pid, l.data(), l.size(), r.data(), r.size(), flags)
               : ::process_vm_readv(pid, l.data(), l.size(), r.data(), r.size(), flags);
}
ssize_t ShortRead(pid_t pid, const iovec* l, unsigned long lc, const iovec* r, unsigned long rc,
                  unsigned long f) {
  return Shortened(false, pid, l, lc, r, rc, f);
}
ssize_t ShortWrite(pid_t pid, const iovec* l, unsigned long lc, const iovec* r, unsigned long rc,
                   unsigned long f) {
  return Shortened(true, pid, l, lc, r, rc, f);
}

ClientProcess Open(const CmaChild& child) {
  auto p = ClientProcess::Open({child.pid(), ::getuid(), ::getgid()});
  REQUIRE(p.ok());
  return std::move(*p);
}

constexpr size_t kBytes = 64 << 10;

}  // namespace

TEST_CASE("cma reads a strided program from a child process byte for byte") {
  auto remote = Pattern(kBytes, 1);
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  const auto expected_src = CmaChild::Expected(remote.data(), kBytes);
  auto channel = MakeCma();
  const auto program = StridedProgram();
  std::vector<std::byte> dst(kBytes, std::byte{0}), want(kBytes, std::byte{0});
  ExecuteProgram(*program, expected_src.data(), want.data());
  REQUIRE(Run(*channel, {program, process.At(child.address()), HostBytes{dst.data()}}).ok());
  CHECK(dst == want);
  // The same request inline.
  std::vector<std::byte> dst2(kBytes, std::byte{0});
  REQUIRE(channel->RunInline({program, process.At(child.address()), HostBytes{dst2.data()}}).ok());
  CHECK(dst2 == want);
}

TEST_CASE("cma writes a strided program into a child process byte for byte") {
  auto remote = Pattern(kBytes, 2);
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  auto want = CmaChild::Expected(remote.data(), kBytes);
  auto channel = MakeCma();
  const auto program = StridedProgram();
  const auto src = Pattern(kBytes, 3);
  ExecuteProgram(*program, src.data(), want.data());
  REQUIRE(Run(*channel,
              {program, HostBytes{const_cast<std::byte*>(src.data())}, process.At(child.address())})
              .ok());
  CHECK(child.Dump() == want);
}

TEST_CASE("cma splits more runs than one call takes into batches of at most IOV_MAX") {
  auto remote = Pattern(kBytes * 2, 4);
  CmaChild child(remote.data(), kBytes * 2);
  const ClientProcess process = Open(child);
  const auto expected_src = CmaChild::Expected(remote.data(), kBytes * 2);
  const auto program = ManyRuns(5000, 8, 24);  // 5000 runs, none adjacent
  std::vector<std::byte> dst(kBytes * 2, std::byte{0}), want(kBytes * 2, std::byte{0});
  ExecuteProgram(*program, expected_src.data(), want.data());
  CmaTarget t{.pid = process.pid(),
              .pidfd = process.pidfd(),
              .remote_base = child.address(),
              .local_base = dst.data()};
  CmaCopyStats stats;
  REQUIRE(CmaCopy(*program, t, nullptr, {}, &stats).ok());
  CHECK(dst == want);
  CHECK(stats.batches == 5);  // ceil(5000 / 1024)
  CHECK(stats.remote_iovecs == 5000);
  CHECK(stats.local_iovecs == 5000);

  // Adjacent runs coalesce: a dense program is one iovec per side, and a
  // byte cap per batch splits it.
  CmaCopyStats dense;
  std::vector<std::byte> d2(kBytes * 2);
  REQUIRE(CmaCopy(*ManyRuns(4096, 32, 32), t, nullptr, {.batch_bytes = 50000}, &dense).ok());
  CHECK(dense.batches == 3);  // 131072 bytes in 50000-byte calls
  CHECK(dense.remote_iovecs == 3);
}

TEST_CASE("cma resumes short calls from the byte they stopped at") {
  auto remote = Pattern(kBytes, 5);
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  const auto program = StridedProgram();
  Hook h{.max_bytes = 37};  // splits runs mid-iovec on both sides
  hook = &h;
  const auto expected_src = CmaChild::Expected(remote.data(), kBytes);
  std::vector<std::byte> dst(kBytes, std::byte{0}), want(kBytes, std::byte{0});
  ExecuteProgram(*program, expected_src.data(), want.data());
  CmaTarget t{.pid = process.pid(),
              .pidfd = process.pidfd(),
              .remote_base = child.address(),
              .local_base = dst.data(),
              .syscall = ShortRead};
  CmaCopyStats stats;
  REQUIRE(CmaCopy(*program, t, nullptr, {}, &stats).ok());
  CHECK(dst == want);
  CHECK(stats.calls == (program->bytes + 36) / 37);

  // And writing.
  h.calls = 0;
  const auto src = Pattern(kBytes, 6);
  auto child_want = expected_src;
  ExecuteProgram(*program, src.data(), child_want.data());
  t.local_base = const_cast<std::byte*>(src.data());
  t.direction = CmaDirection::kWrite;
  t.syscall = ShortWrite;
  REQUIRE(CmaCopy(*program, t).ok());
  CHECK(child.Dump() == child_want);
  hook = nullptr;
}

TEST_CASE("cma copies what is mapped, then names the unmapped address") {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  void* area =
      ::mmap(nullptr, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  REQUIRE(area != MAP_FAILED);
  auto* bytes = static_cast<std::byte*>(area);
  std::fill(bytes, bytes + 2 * page, std::byte{0x11});
  // The child drops the second page: the range's tail is unmapped there.
  CmaChild child(bytes, page, [&] { ::munmap(bytes + page, page); });
  const ClientProcess process = Open(child);
  std::vector<std::byte> dst(2 * page, std::byte{0});
  CmaTarget t{.pid = process.pid(),
              .pidfd = process.pidfd(),
              .remote_base = child.address(),
              .local_base = dst.data()};
  CmaCopyStats stats;
  const Status s = CmaCopy(*ContiguousProgram(2 * page), t, nullptr, {}, &stats);
  CHECK(s.code() == absl::StatusCode::kInvalidArgument);
  char where[32];
  std::snprintf(where, sizeof(where), "%zu bytes at %p", page, static_cast<void*>(bytes + page));
  CHECK_THAT(Message(s), Catch::Contains(where) && Catch::Contains(std::to_string(child.pid())));
  CHECK(stats.calls == 2);  // a short call, then the one that moved nothing
  // The mapped page arrived.
  CHECK(std::all_of(dst.begin(), dst.begin() + static_cast<long>(page),
                    [](std::byte b) { return b == std::byte{0x11 ^ 0x5A}; }));
  ::munmap(area, 2 * page);
}

TEST_CASE("a child killed mid-request fails it cleanly and the channel keeps serving") {
  auto remote = Pattern(kBytes, 7);
  auto channel = MakeCma();
  std::vector<std::byte> dst(kBytes);
  for (bool reap : {false, true}) {
    CmaChild child(remote.data(), kBytes);
    const ClientProcess process = Open(child);
    // Killed between the second and third batch of 1 KiB runs.
    Hook h{.before = [&](int call) {
      if (call == 3) child.Kill(reap);
    }};
    hook = &h;
    CmaTarget t{.pid = process.pid(),
                .pidfd = process.pidfd(),
                .remote_base = child.address(),
                .local_base = dst.data(),
                .syscall = ShortRead};
    const Status s = CmaCopy(*ContiguousProgram(kBytes), t, nullptr, {.batch_bytes = 1024});
    hook = nullptr;
    CHECK(s.code() == absl::StatusCode::kNotFound);
    CHECK_THAT(Message(s), Catch::Contains(StrCat("process ", child.pid(), " has exited")));
    // Through the channel, on the dead process: refused the same way.
    const Status again =
        Run(*channel, {ContiguousProgram(64), process.At(child.address()), HostBytes{dst.data()}});
    CHECK(again.code() == absl::StatusCode::kNotFound);
    CHECK(process.CheckAlive().code() == absl::StatusCode::kNotFound);
    child.Reap();
  }
  // Still serving a live one.
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  REQUIRE(
      Run(*channel, {ContiguousProgram(kBytes), process.At(child.address()), HostBytes{dst.data()}})
          .ok());
  CHECK(dst == CmaChild::Expected(remote.data(), kBytes));
}

TEST_CASE("a client that exec()s after registering is never reached in its new program") {
  // The attack: register, then exec a (setuid) program and have a sibling
  // holding the session copy from or into the same addresses. The daemon
  // holds CAP_SYS_PTRACE, so process_vm_* would reach the new image; the
  // copy goes through the address space that was checked instead.
  auto remote = Pattern(kBytes, 9);
  auto channel = MakeCma();
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  child.Exec();
  REQUIRE(process.CheckAlive().ok());  // the same process, another program
  std::vector<std::byte> dst(kBytes, std::byte{0});
  const Status r =
      Run(*channel, {ContiguousProgram(4096), process.At(child.address()), HostBytes{dst.data()}});
  CHECK(r.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(r), Catch::Contains("replaced its program (exec)"));
  CHECK(std::all_of(dst.begin(), dst.end(), [](std::byte b) { return b == std::byte{0}; }));
  std::vector<std::byte> src(4096, std::byte{1});
  const Status w =
      Run(*channel, {ContiguousProgram(4096), HostBytes{src.data()}, process.At(child.address())});
  CHECK(w.code() == absl::StatusCode::kFailedPrecondition);
  // A fresh registration checks the new program (same uid here: accepted).
  const ClientProcess again = Open(child);
  CHECK(again.CheckAlive().ok());
}

TEST_CASE("cma stops between batches once cancelled") {
  auto remote = Pattern(kBytes, 8);
  CmaChild child(remote.data(), kBytes);
  const ClientProcess process = Open(child);
  std::vector<std::byte> dst(kBytes, std::byte{0});
  std::atomic<bool> cancelled{false};
  Hook h{.before = [&](int call) {
    if (call == 2) cancelled = true;
  }};
  hook = &h;
  CmaTarget t{.pid = process.pid(),
              .pidfd = process.pidfd(),
              .remote_base = child.address(),
              .local_base = dst.data(),
              .syscall = ShortRead};
  CmaCopyStats stats;
  const Status s =
      CmaCopy(*ContiguousProgram(kBytes), t, &cancelled, {.batch_bytes = 4096}, &stats);
  hook = nullptr;
  CHECK(s.code() == absl::StatusCode::kCancelled);
  CHECK(stats.batches == 2);  // the second batch was running when the flag was set
  // A request cancelled before it runs does nothing.
  auto channel = MakeCma(1);
  std::vector<std::byte> untouched(kBytes, std::byte{0});
  ChannelRequest r{ContiguousProgram(kBytes), process.At(child.address()),
                   HostBytes{untouched.data()}};
  r.cancelled = &cancelled;
  CHECK(Run(*channel, r).code() == absl::StatusCode::kCancelled);
  CHECK(std::all_of(untouched.begin(), untouched.end(),
                    [](std::byte b) { return b == std::byte{0}; }));
}

TEST_CASE("cma refuses endpoints it cannot serve") {
  auto channel = MakeCma(1);
  std::vector<std::byte> a(64), b(64);
  const auto p = ContiguousProgram(64);
  Status s = Run(*channel, {p, ProcessBytes{1, 0, 3}, ProcessBytes{2, 0, 4}});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(s), Catch::Contains("not between two other processes"));
  s = Run(*channel, {p, HostBytes{a.data()}, HostBytes{b.data()}});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  s = Run(*channel, {p, ProcessBytes{::getpid(), 0, -1}, HostBytes{b.data()}});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);
  CHECK_THAT(Message(s), Catch::Contains("without the pidfd"));
  s = Run(*channel, {p, FileRange{.fd = 0, .path = "x"}, ProcessBytes{::getpid(), 0, 3}});
  CHECK(s.code() == absl::StatusCode::kFailedPrecondition);

  ChannelConfig c;
  c.name = "capped";
  c.kind = ChannelKind::kCma;
  c.rate_limit_bytes_per_s = 1000;
  CHECK_FALSE(MakeChannel(c).ok());
}

TEST_CASE("the probe finds cma here and the calibration measures it quickly") {
  CHECK(ProbeCma().ok());
  for (const ChannelAvailability& a : ProbeChannels({})) {
    if (a.kind == ChannelKind::kCma) CHECK(a.available);
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto cost = MeasureCmaCost();
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  REQUIRE(cost.ok());
  CHECK(cost->per_iovec_seconds > 0);
  CHECK(cost->per_iovec_seconds < 1e-4);
  CHECK(cost->bytes_per_second > 1e8);
  WARN("cma: " << cost->per_iovec_seconds * 1e9 << " ns per iovec, " << cost->bytes_per_second / 1e9
               << " GB/s contiguous, measured in " << took * 1e3 << " ms");
}

}  // namespace ISOMETRY_TEST_FILE
