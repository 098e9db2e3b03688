// End-to-end 2-D redistribution on this node, Isometry vs ScaLAPACK's
// pdgemr2d in the same run (docs/guides/redistribution.md, "Redistributing between
// jobs (M:N)"). A double array of --mib MiB, --cols columns, moves from a
// producer grid to a consumer grid (default 2x2 -> 3x1, 256x256 blocks),
// both in ScaLAPACK's layout (block-cyclic, column-major local arrays).
//   Isometry: a private isometryd (or --socket), every rank a session of
//     this process, local arrays in the daemon's pool (--private: this
//     process's heap registered as private memory); the time of one
//     Redistribute call, started by the consumer's rank 0.
//   pdgemr2d: scalapack_redistribute under mpiexec.mpich, the two grids on
//     disjoint ranks (7 for 2x2 -> 3x1, as Isometry's 7 sessions), timed
//     barrier to barrier after one untimed call.
// Rounds are paired (pdgemr2d, then Isometry); the ratio is pdgemr2d's
// time over Isometry's (above 1: Isometry is faster).
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "core/main_guard.h"
#include "tools/bench/block_cyclic_jobs.h"
#include "tools/bench/stopwatch.h"
#include "tools/common/daemon_process.h"

using isometry::bench::BlockCyclic2d;
using isometry::bench::BlockCyclicJobs;
using isometry::bench::Redistribution2d;

namespace {

// "PxQ:MBxNB".
bool ParseGrid(const std::string& s, BlockCyclic2d* g) {
  unsigned long long p = 0, q = 0, mb = 0, nb = 0;
  char tail = 0;
  if (std::sscanf(s.c_str(), "%llux%llu:%llux%llu%c", &p, &q, &mb, &nb, &tail) != 4 || p == 0 ||
      q == 0 || mb == 0 || nb == 0 || p * q > 64) {
    return false;
  }
  *g = {p, q, mb, nb};
  return true;
}

// pdgemr2d's time for one call (seconds), or a negative value.
double RunPdgemr2d(const Redistribution2d& r) {
  const uint64_t ranks = r.from.p * r.from.q + r.to.p * r.to.q;
  std::string cmd = std::string("UCX_TLS=self,shm ") + ISOMETRY_MPIEXEC + " -iface lo -n " +
                    std::to_string(ranks) + " " + ISOMETRY_SCALAPACK_PROGRAM + " bench " +
                    std::to_string(r.m) + " " + std::to_string(r.n);
  for (const BlockCyclic2d& g : {r.from, r.to}) {
    for (uint64_t v : {g.p, g.q, g.mb, g.nb}) cmd += " " + std::to_string(v);
  }
  cmd += " 1";
  FILE* out = popen(cmd.c_str(), "r");
  if (!out) return -1;
  char line[512];
  double seconds = -1;
  while (std::fgets(line, sizeof line, out)) {
    int rep = 0;
    double s = 0;
    if (std::sscanf(line, "pdgemr2d rep=%d seconds=%lf", &rep, &s) == 2) seconds = s;
  }
  const int status = pclose(out);
  return status == 0 ? seconds : -1;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int Main(int argc, char** argv) {
  CLI::App app{"Isometry Redistribute vs ScaLAPACK pdgemr2d, 2-D block-cyclic, this node"};
  uint64_t mib = 1024, cols = 8192;
  int rounds = 3;
  std::string from = "2x2:256x256", to = "3x1:256x256", socket;
  bool private_memory = false;
  app.add_option("--mib", mib, "array size in MiB of doubles")->check(CLI::Range(1, 16384));
  app.add_option("--cols", cols, "global columns (rows follow from --mib)")
      ->check(CLI::Range(1, 1 << 24));
  app.add_option("--rounds", rounds, "paired rounds")->check(CLI::Range(1, 100));
  app.add_option("--from", from, "producer grid and block, PxQ:MBxNB");
  app.add_option("--to", to, "consumer grid and block, PxQ:MBxNB");
  app.add_option("--socket", socket, "a running daemon's local socket (default: start one)");
  app.add_flag("--private", private_memory, "Isometry's ranks in private memory, not the pool");
  CLI11_PARSE(app, argc, argv);
  Redistribution2d r;
  if (!ParseGrid(from, &r.from) || !ParseGrid(to, &r.to)) {
    std::fprintf(stderr, "--from/--to: want PxQ:MBxNB with P*Q <= 64\n");
    return 2;
  }
  r.n = cols;
  r.m = mib * 1024 * 1024 / 8 / cols;
  if (r.m == 0) return std::fprintf(stderr, "--cols exceeds the array\n"), 2;
  const double bytes = static_cast<double>(r.m * r.n * 8);
  std::optional<isometry::tools::DaemonProcess> daemon;
  if (socket.empty()) {
    // Both sides' arrays in the pool, plus slack for per-rank rounding.
    const uint64_t pool_mib = 2 * mib + 64;
    const std::string config = "[[memory]]\nname = \"sys0\"\npool = \"" + std::to_string(pool_mib) +
                               "MiB\"\nclient_quota = \"" + std::to_string(pool_mib) +
                               "MiB\"\n[[channel]]\nname = \"memcpy0\"\n"
                               "[[channel]]\nname = \"cma0\"\nkind = \"cma\"\n";
    auto d = isometry::tools::DaemonProcess::Start(isometry::tools::DaemonProcess::Locate(argv[0]),
                                                   config);
    if (!d.ok()) return std::fprintf(stderr, "isometryd: %s\n", d.status().ToString().c_str()), 1;
    daemon.emplace(*std::move(d));
    socket = daemon->local_socket();
  }
  std::printf("array %llux%llu doubles (%.3f GB), %s -> %s, Isometry ranks in %s\n",
              static_cast<unsigned long long>(r.m), static_cast<unsigned long long>(r.n),
              bytes / 1e9, from.c_str(), to.c_str(),
              private_memory ? "private memory" : "the daemon's pool");
  auto jobs = BlockCyclicJobs::Start(socket, r, "bench", private_memory);
  if (!jobs.ok()) return std::fprintf(stderr, "join: %s\n", jobs.status().ToString().c_str()), 1;
  // One untimed round, as pdgemr2d gets: the consumer's pages and the
  // daemon's plan are warm for both.
  if (const isometry::Status s = (*jobs)->Run(); !s.ok() || (*jobs)->Mismatches() != 0) {
    return std::fprintf(stderr, "Isometry's redistribution is wrong: %s\n", s.ToString().c_str()),
           1;
  }
  std::vector<double> ours, theirs;
  for (int round = 1; round <= rounds; ++round) {
    const double t = RunPdgemr2d(r);
    if (t <= 0) return std::fprintf(stderr, "pdgemr2d run failed\n"), 1;
    const auto t0 = isometry::bench::Clock::now();
    if (const isometry::Status s = (*jobs)->Run(); !s.ok()) {
      return std::fprintf(stderr, "Redistribute: %s\n", s.ToString().c_str()), 1;
    }
    const double o = isometry::bench::SecondsSince(t0);
    theirs.push_back(t);
    ours.push_back(o);
    std::printf("round %d: pdgemr2d %.4f s %.3f GB/s, Isometry %.4f s %.3f GB/s, ratio %.2fx\n",
                round, t, bytes / t / 1e9, o, bytes / o / 1e9, t / o);
    std::fflush(stdout);
  }
  if ((*jobs)->Mismatches() != 0) return std::fprintf(stderr, "consumer array is wrong\n"), 1;
  const double mt = Median(theirs), mo = Median(ours);
  std::printf("median of %d: pdgemr2d %.3f GB/s, Isometry %.3f GB/s, ratio %.2fx (target >= 1.0)\n",
              rounds, bytes / mt / 1e9, bytes / mo / 1e9, mt / mo);
  jobs->reset();
  return daemon && daemon->Stop() != 0 ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  return isometry::RunMain("scalapack_bench", 1, Main, argc, argv);
}
