// channels/cma/cma_gather: when a fragmented read of another process is
// one read of its extent plus a local gather, that it moves exactly the
// program's bytes, and that an extent with an unmapped page between the
// runs falls back to run-by-run reads. The "other process" is this one
// (process_vm_readv on itself through a pidfd), so no child is needed.
#include "procmem/cma_gather.h"

#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <vector>

#include "layout/executor.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using isometry::testing::Pattern;

namespace {

// `outer` groups of `runs` runs of `run` bytes every `stride`, the groups
// `group_stride` apart; dense at the destination.
CopyProgram Runs(uint64_t outer, uint64_t group_stride, uint64_t runs, uint64_t run,
                 uint64_t stride) {
  CopyProgram p;
  CopyOp op;
  op.run_bytes = run;
  op.num_loops = 2;
  op.loops[0] = {.count = outer, .src_stride = group_stride, .dst_stride = runs * run};
  op.loops[1] = {.count = runs, .src_stride = stride, .dst_stride = run};
  p.ops.push_back(op);
  p.bytes = op.bytes();
  p.runs = op.runs();
  return p;
}

int SelfPidfd() { return static_cast<int>(syscall(SYS_pidfd_open, getpid(), 0)); }

}  // namespace

TEST_CASE("the source extent of a program, negative strides included") {
  CopyProgram p = Runs(2, 4096, 8, 8, 16);
  auto e = SourceExtent(p);
  REQUIRE(e);
  CHECK(e->begin == 0);
  CHECK(e->end == 4096 + 7 * 16 + 8);
  p.ops[0].src_offset = 10000;
  p.ops[0].loops[1].src_stride = static_cast<uint64_t>(-16);  // runs going down
  e = SourceExtent(p);
  REQUIRE(e);
  CHECK(e->begin == 10000 - 7 * 16);
  CHECK(e->end == 10000 + 4096 + 8);
}

TEST_CASE("gathering pays for many small runs close together, never past its bound") {
  CHECK(GatherPays(131072, 2 << 20));    // 8-byte blocks every 16 bytes
  CHECK_FALSE(GatherPays(16, 2 << 20));  // 64 KiB blocks: run by run
  CHECK_FALSE(GatherPays(1, 64));        // one run: nothing to gather
  CHECK_FALSE(GatherPays(1 << 24, kMaxGatherBytes + 1));
}

TEST_CASE("a gathered read moves exactly the program's bytes") {
  const std::vector<std::byte> src = Pattern(1 << 20, 3);
  const CopyProgram p = Runs(64, 16384, 512, 8, 24);  // 32768 runs of 8 bytes
  std::vector<std::byte> got(p.bytes), want(p.bytes);
  ExecuteProgram(p, src.data(), want.data());
  const int pidfd = SelfPidfd();
  REQUIRE(pidfd >= 0);
  CmaTarget t{.pid = getpid(),
              .pidfd = pidfd,
              .remote_base = reinterpret_cast<uintptr_t>(src.data()),
              .local_base = got.data()};
  const std::optional<Status> s = TryGatherRead(p, t, nullptr);
  REQUIRE(s.has_value());  // it gathered
  REQUIRE(s->ok());
  CHECK(got == want);
  // Writes never gather (they would overwrite the bytes between runs).
  t.direction = CmaDirection::kWrite;
  CHECK_FALSE(TryGatherRead(p, t, nullptr).has_value());
  close(pidfd);
}

TEST_CASE("an unmapped page between the runs falls back to run-by-run reads") {
  const long page = sysconf(_SC_PAGESIZE);
  auto* base = static_cast<std::byte*>(
      mmap(nullptr, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
  REQUIRE(base != MAP_FAILED);
  for (long i = 0; i < 3 * page; ++i) base[i] = static_cast<std::byte>(i * 5 + 1);
  REQUIRE(munmap(base + page, page) == 0);             // the hole
  const CopyProgram p = Runs(2, 2 * page, 64, 8, 16);  // runs in pages 0 and 2
  const int pidfd = SelfPidfd();
  REQUIRE(pidfd >= 0);
  std::vector<std::byte> got(p.bytes), want(p.bytes);
  CmaTarget t{.pid = getpid(),
              .pidfd = pidfd,
              .remote_base = reinterpret_cast<uintptr_t>(base),
              .local_base = got.data()};
  CHECK_FALSE(TryGatherRead(p, t, nullptr).has_value());
  REQUIRE(CmaCopy(p, t).ok());
  ExecuteProgram(p, base, want.data());
  CHECK(got == want);
  close(pidfd);
  munmap(base, page);
  munmap(base + 2 * page, page);
}

TEST_CASE("a program cut in two copies what it copies, each half about half") {
  const std::vector<std::byte> src = Pattern(1 << 20, 5);
  CopyProgram two_ops = Runs(4, 8192, 64, 16, 32);
  CopyOp second = two_ops.ops[0];
  second.src_offset = 65536;
  second.dst_offset = two_ops.bytes;
  two_ops.ops.push_back(second);
  two_ops.bytes *= 2;
  two_ops.runs *= 2;
  CopyProgram single_run;
  single_run.ops.resize(1);
  single_run.ops[0].run_bytes = 4096;
  single_run.bytes = 4096;
  single_run.runs = 1;
  // An outer loop of 3 (halves of 1 and 2: the loop of 1 goes) and of 64.
  for (const CopyProgram& p :
       {Runs(3, 16384, 512, 8, 24), Runs(64, 16384, 8, 8, 24), two_ops, single_run}) {
    INFO("ops " << p.ops.size() << ", bytes " << p.bytes);
    const std::vector<CopyProgram> halves = SplitProgram(p);
    REQUIRE((halves.size() == 2 || p.runs == 1));
    std::vector<std::byte> got(p.bytes), want(p.bytes);
    ExecuteProgram(p, src.data(), want.data());
    uint64_t bytes = 0, runs = 0;
    for (const CopyProgram& h : halves) {
      ExecuteProgram(h, src.data(), got.data());
      bytes += h.bytes;
      runs += h.runs;
      if (halves.size() == 2) CHECK(h.bytes <= p.bytes * 3 / 4);
      for (const CopyOp& op : h.ops) {
        for (int k = 0; k < op.num_loops; ++k) CHECK(op.loops[k].count >= 2);  // canonical
      }
    }
    CHECK(got == want);
    CHECK(bytes == p.bytes);
    CHECK(runs == p.runs);
  }
}

TEST_CASE("batches built once and issued by two threads' shares move the program's bytes") {
  const std::vector<std::byte> src = Pattern(1 << 20, 7);
  const CopyProgram p = Runs(16, 65536, 8, 4096, 8192);  // 128 runs of 4 KiB
  std::vector<std::byte> got(p.bytes), want(p.bytes);
  ExecuteProgram(p, src.data(), want.data());
  const int pidfd = SelfPidfd();
  REQUIRE(pidfd >= 0);
  const CmaTarget t{.pid = getpid(),
                    .pidfd = pidfd,
                    .remote_base = reinterpret_cast<uintptr_t>(src.data()),
                    .local_base = got.data()};
  const CmaLimits limits{.batch_bytes = 64 << 10, .max_iovecs = 5, .check_before = false};
  const CmaBatches b = BuildCmaBatches(p, t, limits);
  CHECK(b.batches.size() == (p.runs + 4) / 5);        // 5 runs of 4 KiB a batch
  REQUIRE(IssueCmaBatches(b, t, 1, 2, limits).ok());  // the odd ones
  CHECK(got != want);
  REQUIRE(IssueCmaBatches(b, t, 0, 2, limits).ok());  // then the even ones
  CHECK(got == want);
  close(pidfd);
}

}  // namespace ISOMETRY_TEST_FILE
