// Isometry's Redistribute against ScaLAPACK's pdgemr2d (issue #18): the
// same 2-D block-cyclic descriptors (blocks that do and do not divide the
// extents; 2x2->3x1, 1x4->2x2, 3x2->2x3, both grids on disjoint ranks and
// on shared ones) go through pdgemr2d under mpiexec
// (tools/bench/scalapack_redistribute.c, which writes every consumer
// rank's local array) and through a real isometryd, each rank a session of
// this process with its array in the daemon's pool or in private memory;
// every consumer-local array must be identical, byte for byte, in
// ScaLAPACK's column-major local storage. Skips (77) with the reason when
// ScaLAPACK, MPICH's mpiexec or the daemon is not at hand.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>
#include <vector>

#include "tools/bench/block_cyclic_jobs.h"
#include "tools/common/daemon_process.h"

using isometry::bench::BlockCyclic2d;
using isometry::bench::BlockCyclicJobs;
using isometry::bench::Redistribution2d;

namespace {

constexpr int kSkip = 77;

constexpr char kConfig[] = R"(max_distributed_per_uid = 32
[[memory]]
name = "sys0"
pool = "256MiB"
client_quota = "256MiB"
[[channel]]
name = "memcpy0"
[[channel]]
name = "cma0"
kind = "cma"
)";

struct Case {
  Redistribution2d r;
  bool disjoint;        // the two grids on different MPI ranks (two jobs)
  bool private_memory;  // Isometry's ranks in private memory, else the pool
};

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {{37, 29, {2, 2, 3, 5}, {3, 1, 4, 7}}, true, false},    // blocks do not divide
      {{64, 48, {2, 2, 8, 8}, {3, 1, 8, 16}}, false, false},  // they divide
      {{20, 30, {1, 4, 2, 3}, {2, 2, 5, 5}}, true, true},
      {{25, 19, {3, 2, 4, 4}, {2, 3, 3, 2}}, false, true},
      {{31, 17, {2, 2, 1, 1}, {3, 1, 1, 1}}, true, false},     // cyclic
      {{40, 40, {3, 2, 64, 64}, {2, 3, 7, 40}}, true, false},  // a block past the extent
  };
  return cases;
}

std::string Describe(const Case& c) {
  auto grid = [](const BlockCyclic2d& g) {
    return std::to_string(g.p) + "x" + std::to_string(g.q) + " blocks " + std::to_string(g.mb) +
           "x" + std::to_string(g.nb);
  };
  return std::to_string(c.r.m) + "x" + std::to_string(c.r.n) + " " + grid(c.r.from) + " -> " +
         grid(c.r.to) + (c.disjoint ? ", disjoint ranks" : ", shared ranks") +
         (c.private_memory ? ", private memory" : ", pool");
}

// pdgemr2d's consumer-local arrays for `c`, written under `dir`.
bool RunScalapack(const std::string& mpiexec, const std::string& program, const Case& c,
                  const std::string& dir) {
  const uint64_t ps = c.r.from.p * c.r.from.q, pd = c.r.to.p * c.r.to.q;
  const uint64_t ranks = c.disjoint ? ps + pd : std::max(ps, pd);
  std::string cmd = "UCX_TLS=self,shm " + mpiexec + " -iface lo -n " + std::to_string(ranks) + " " +
                    program + " check " + std::to_string(c.r.m) + " " + std::to_string(c.r.n);
  for (const BlockCyclic2d& g : {c.r.from, c.r.to}) {
    for (uint64_t v : {g.p, g.q, g.mb, g.nb}) cmd += " " + std::to_string(v);
  }
  cmd += " " + dir;
  std::printf("  %s\n", cmd.c_str());
  std::fflush(stdout);
  return std::system(cmd.c_str()) == 0;
}

std::vector<char> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// Failures of one case (0 when every consumer-local array matches).
int RunCase(const isometry::tools::DaemonProcess& daemon, const std::string& mpiexec,
            const std::string& program, const Case& c, int index) {
  std::printf("case %d: %s\n", index, Describe(c).c_str());
  char tmpl[] = "/tmp/isometry_pdgemr2d_XXXXXX";
  if (!mkdtemp(tmpl)) return std::printf("  FAIL: mkdtemp\n"), 1;
  const std::string dir = tmpl;
  int failed = 0;
  if (!RunScalapack(mpiexec, program, c, dir)) {
    std::printf("  FAIL: pdgemr2d run failed\n");
    failed = 1;
  }
  auto jobs = BlockCyclicJobs::Start(daemon.local_socket(), c.r, "case" + std::to_string(index),
                                     c.private_memory);
  if (!jobs.ok()) {
    std::printf("  FAIL: joining: %s\n", jobs.status().ToString().c_str());
    failed = 1;
  } else if (const isometry::Status s = (*jobs)->Run(); !s.ok()) {
    std::printf("  FAIL: Redistribute: %s\n", s.ToString().c_str());
    failed = 1;
  } else if (const uint64_t bad = (*jobs)->Mismatches(); bad != 0) {
    std::printf("  FAIL: Isometry's consumer holds %llu wrong elements\n",
                static_cast<unsigned long long>(bad));
    failed = 1;
  }
  for (uint64_t rank = 0; !failed && rank < c.r.to.p * c.r.to.q; ++rank) {
    const std::vector<char> theirs = ReadAll(dir + "/consumer_" + std::to_string(rank) + ".bin");
    const std::span<const double> ours = (*jobs)->Consumer(rank);
    const bool same = theirs.size() == ours.size_bytes() &&
                      (ours.empty() || std::memcmp(theirs.data(), ours.data(), theirs.size()) == 0);
    if (!same) {
      std::printf("  FAIL: consumer rank %llu: pdgemr2d %zu bytes, Isometry %zu bytes, differ\n",
                  static_cast<unsigned long long>(rank), theirs.size(), ours.size_bytes());
      failed = 1;
    }
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  std::printf("  %s\n", failed ? "FAILED" : "identical consumer-local arrays");
  return failed;
}

}  // namespace

int main() {
  const char* program = std::getenv("ISOMETRY_SCALAPACK_PROGRAM");
  const char* mpiexec = std::getenv("ISOMETRY_MPIEXEC");
  const char* daemon_bin = std::getenv("ISOMETRYD");
  if (!program || !*program || !mpiexec || !*mpiexec) {
    std::printf(
        "SKIP: ScaLAPACK (libscalapack-mpich-dev) or MPICH's mpiexec was not found "
        "at configure time\n");
    return kSkip;
  }
  if (access(program, X_OK) != 0 || access(mpiexec, X_OK) != 0) {
    std::printf("SKIP: %s or %s is not executable\n", program, mpiexec);
    return kSkip;
  }
  if (!daemon_bin) {
    std::printf("FAIL: ISOMETRYD is not set (ctest sets it)\n");
    return 1;
  }
  auto daemon = isometry::tools::DaemonProcess::Start(daemon_bin, kConfig);
  if (!daemon.ok()) {
    std::printf("FAIL: starting isometryd: %s\n", daemon.status().ToString().c_str());
    return 1;
  }
  int failed = 0;
  for (size_t i = 0; i < Cases().size(); ++i) {
    failed += RunCase(*daemon, mpiexec, program, Cases()[i], static_cast<int>(i));
  }
  const int stopped = daemon->Stop();
  if (stopped != 0) std::printf("FAIL: isometryd exited with %d\n", stopped);
  std::printf("%d of %zu cases differ from pdgemr2d\n", failed, Cases().size());
  return failed != 0 || stopped != 0 ? 1 : 0;
}
