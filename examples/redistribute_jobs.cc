// Two jobs of different sizes hand a 2-D array of doubles over through the
// local isometryd (docs/guides/redistribution.md, "Redistributing between jobs (M:N)"): a
// producer job of 4 processes on a 2x2 grid, BLOCK_CYCLIC(3) x
// BLOCK_CYCLIC(5), row-major local arrays, and a consumer job of 3
// processes on a 3x1 grid, BLOCK x BLOCK, column-major local arrays (as
// ScaLAPACK keeps them). Every rank is its own process and session; the
// consumer's rank 0 starts the redistribution, then every consumer rank
// checks its local array.
//   redistribute_jobs [LOCAL_SOCKET]  (default: $ISOMETRY_LOCAL_SOCKET or
//                                      /run/isometry/isometry.sock)
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "client/cpp/isometry_client.h"

using namespace isometry;
using client::DimDistribution;

namespace {

constexpr uint64_t kRows = 60, kCols = 40;

struct Job {
  client::DistributedSpec spec;
  std::vector<uint64_t> blocks;  // per dimension (BLOCK: ceil(n / p))
  bool column_major_storage = false;
};

// The global indices grid coordinate `coord` holds in one dimension, in
// local order.
std::vector<uint64_t> Owned(uint64_t n, uint64_t block, uint64_t procs, uint64_t coord) {
  std::vector<uint64_t> out;
  for (uint64_t g = 0; g < n; ++g) {
    if ((g / block) % procs == coord) out.push_back(g);
  }
  return out;
}

double Value(uint64_t i, uint64_t j) { return static_cast<double>(i * 1000 + j); }

// One rank's life: join, then obey the parent's commands on `in`
// ('r': redistribute, 'v': check and exit), answering on `out`.
int Rank(const std::string& socket, const Job& job, const char* name, uint64_t rank, bool producer,
         int in, int out) {
  auto c = client::Client::Connect({.local_socket = socket, .name = name});
  if (!c.ok()) return std::fprintf(stderr, "%s\n", c.status().ToString().c_str()), 1;
  const uint64_t grid_cols = job.spec.grid[1];
  const auto rows = Owned(kRows, job.blocks[0], job.spec.grid[0], rank / grid_cols);
  const auto cols = Owned(kCols, job.blocks[1], grid_cols, rank % grid_cols);
  const InstanceShape shape{
      Box::FromExtents({static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols.size())}),
      FieldSpace::Uniform(1, 8),
      job.column_major_storage ? Layout::ColumnMajor(2) : Layout::RowMajor(2)};
  auto mem = (*c)->Allocate("sys0", shape.total_bytes());
  if (!mem.ok()) return std::fprintf(stderr, "%s\n", mem.status().ToString().c_str()), 1;
  auto at = [&](size_t i, size_t k) {
    return mem->data() + shape.OffsetOf(0, {static_cast<int64_t>(i), static_cast<int64_t>(k)});
  };
  for (size_t i = 0; i < rows.size(); ++i) {
    for (size_t k = 0; k < cols.size(); ++k) {
      const double v = producer ? Value(rows[i], cols[k]) : 0.0;
      std::memcpy(at(i, k), &v, 8);
    }
  }
  auto local = (*c)->Register(*mem, 0, shape);
  if (!local.ok()) return std::fprintf(stderr, "%s\n", local.status().ToString().c_str()), 1;
  auto joined = (*c)->JoinDistributed(name, job.spec, rank, &*local);
  if (!joined.ok()) return std::fprintf(stderr, "%s\n", joined.status().ToString().c_str()), 1;
  char cmd = 'j';
  if (write(out, &cmd, 1) != 1) return 1;
  while (read(in, &cmd, 1) == 1) {
    if (cmd == 'r') {
      const client::Completion done = (*c)->Redistribute("producer", "consumer");
      if (!done.status.ok()) return std::fprintf(stderr, "%s\n", done.status.ToString().c_str()), 1;
      std::printf("redistributed %s -> consumer (transfer %llu)\n", joined->distribution.c_str(),
                  static_cast<unsigned long long>(done.transfer));
      std::fflush(stdout);  // the rank ends with _exit
    } else if (cmd == 'v') {
      for (size_t i = 0; i < rows.size() && !producer; ++i) {
        for (size_t k = 0; k < cols.size(); ++k) {
          double v = 0;
          std::memcpy(&v, at(i, k), 8);
          if (v != Value(rows[i], cols[k])) {
            std::fprintf(stderr, "consumer rank %llu: (%zu, %zu) holds %g\n",
                         static_cast<unsigned long long>(rank), i, k, v);
            return 1;
          }
        }
      }
      return 0;
    }
    cmd = 'd';
    if (write(out, &cmd, 1) != 1) return 1;
  }
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  const char* env = std::getenv("ISOMETRY_LOCAL_SOCKET");
  const std::string socket = argc > 1 ? argv[1] : env ? env : "/run/isometry/isometry.sock";
  const DimDistribution block{};
  const Job producer{
      {{kRows, kCols},
       {{DimDistribution::Kind::kBlockCyclic, 3}, {DimDistribution::Kind::kBlockCyclic, 5}},
       {2, 2},
       false,
       8},
      {3, 5},
      false};
  const Job consumer{{{kRows, kCols}, {block, block}, {3, 1}, false, 8}, {20, 40}, true};
  int up[2];
  if (pipe(up) != 0) return 1;
  std::vector<int> downs;
  std::vector<pid_t> pids;
  for (int r = 0; r < 7; ++r) {
    int down[2];
    if (pipe(down) != 0) return 1;
    const pid_t pid = fork();
    if (pid == 0) {
      const bool is_producer = r < 4;
      const int rank = is_producer ? r : r - 4;
      _exit(Rank(socket, is_producer ? producer : consumer, is_producer ? "producer" : "consumer",
                 static_cast<uint64_t>(rank), is_producer, down[0], up[1]));
    }
    close(down[0]);
    downs.push_back(down[1]);
    pids.push_back(pid);
  }
  close(up[1]);  // a rank that dies early then ends the reads below
  char c = 0;
  int ok = 0;
  for (int r = 0; r < 7; ++r) ok += read(up[0], &c, 1) == 1 && c == 'j';
  if (ok == 7 && write(downs[4], "r", 1) == 1 && read(up[0], &c, 1) == 1 && c == 'd') {
    for (int fd : downs) ok += write(fd, "v", 1) == 1;
  }
  int failed = ok != 14;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed |= !WIFEXITED(status) || WEXITSTATUS(status) != 0;
  }
  std::printf("%s\n", failed ? "redistribution FAILED" : "every consumer rank holds its part");
  return failed;
}
