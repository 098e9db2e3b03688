// Intersection cost per rank vs remote grid size (issue #18, first
// benchmark row): ASPEN vs classical vs FALLS in the same run.
//
//   redistribution_intersections [--extent 10000] [--batches 5] [--min-ms 20] [--json]
//
// As the UDJ paper's evaluation (seed 003, Sect. 5): a 10000 x 10000 global
// array, index computations only, no data. The local (producer) side is a
// 4x4 grid; the remote (consumer) grid grows 4x4, 8x8, ..., 64x64 (16 to
// 4096 ranks). Each case pairs two of the paper's block sizes (1024^2,
// 256^2, 30x50, 654x321), regular to irregular and back. A timing is the
// exchange sets of all 16 local ranks divided by 16, repeated for at least
// --min-ms per batch; the figure is the best of --batches batches. The
// exchange set is the factored form (exchange.h); "aspen+list" adds
// listing every remote rank's piece, which costs the number of pieces.
// Before timing, the three algorithms' results are checked equal.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "core/main_guard.h"
#include "redistribution/exchange.h"
#include "tools/bench/stopwatch.h"

namespace {

using isometry::redistribution::Algorithm;
using isometry::redistribution::AlgorithmName;
using isometry::redistribution::ComputeExchange;
using isometry::redistribution::DimDistribution;
using isometry::redistribution::Distribution;
using isometry::redistribution::ExchangeSet;

constexpr Algorithm kAlgorithms[] = {Algorithm::kAspen, Algorithm::kClassical, Algorithm::kFalls};
constexpr uint64_t kLocalGrid = 4;
constexpr uint64_t kRemoteSides[] = {4, 8, 16, 32, 64};

struct Case {
  const char* name;
  uint64_t local_block[2];
  uint64_t remote_block[2];
};
constexpr Case kCases[] = {
    {"1024x1024->30x50", {1024, 1024}, {30, 50}},
    {"256x256->654x321", {256, 256}, {654, 321}},
    {"30x50->1024x1024", {30, 50}, {1024, 1024}},
    {"654x321->256x256", {654, 321}, {256, 256}},
};

struct Options {
  uint64_t extent = 10000;
  int batches = 5;
  double min_ms = 20;
  bool json = false;
};

Distribution Make2D(uint64_t extent, const uint64_t block[2], uint64_t side) {
  auto d = Distribution::Make(
      {.extents = {extent, extent},
       .dists = {DimDistribution::BlockCyclic(block[0]), DimDistribution::BlockCyclic(block[1])},
       .grid = {side, side}});
  if (!d.ok()) {
    std::fprintf(stderr, "redistribution_intersections: %s\n", d.status().ToString().c_str());
    std::exit(2);  // NOLINT(concurrency-mt-unsafe): single-threaded tool
  }
  return *d;
}

// Defeats dead-code elimination of the timed calls.
volatile uint64_t g_sink = 0;

// Best seconds per local rank over the batches for one algorithm; with
// `list`, listing the pieces (ExchangeSet::Pieces) is timed too. The best
// batch, not the median: the work is pure CPU, so a slower batch only
// measures the other tenants of a shared machine.
double TimePerRank(const Distribution& local, const Distribution& remote, Algorithm alg,
                   const Options& opt, bool list) {
  using isometry::bench::Clock;
  std::vector<double> per_rank;
  for (int b = 0; b < opt.batches; ++b) {
    uint64_t sets = 0;
    const Clock::time_point start = Clock::now();
    double elapsed = 0;
    while (elapsed * 1e3 < opt.min_ms) {
      for (uint64_t r = 0; r < local.rank_count(); ++r) {
        const ExchangeSet s = ComputeExchange(local, r, remote, alg).value();
        g_sink = g_sink + s.per_dim[0].runs.size() + s.per_dim[1].runs.size();
        if (list) g_sink = g_sink + s.Pieces().size();
        ++sets;
      }
      elapsed = isometry::bench::SecondsSince(start);
    }
    per_rank.push_back(elapsed / static_cast<double>(sets));
  }
  return *std::min_element(per_rank.begin(), per_rank.end());
}

// The three algorithms must agree before their times mean anything.
bool Agree(const Distribution& local, const Distribution& remote) {
  for (uint64_t r = 0; r < local.rank_count(); ++r) {
    const ExchangeSet a = ComputeExchange(local, r, remote, Algorithm::kAspen).value();
    if (!(a == ComputeExchange(local, r, remote, Algorithm::kClassical).value()) ||
        !(a == ComputeExchange(local, r, remote, Algorithm::kFalls).value())) {
      return false;
    }
  }
  return true;
}

struct Measured {
  uint64_t remote_ranks = 0;
  double seconds[3] = {0, 0, 0};  // per kAlgorithms entry
  double aspen_listed = 0;        // ASPEN plus listing every piece
  double pieces = 0;              // remote ranks receiving something, mean per local rank
};

double MeanPieces(const Distribution& local, const Distribution& remote) {
  double total = 0;
  for (uint64_t r = 0; r < local.rank_count(); ++r) {
    total += static_cast<double>(
        ComputeExchange(local, r, remote, Algorithm::kAspen).value().PieceCount());
  }
  return total / static_cast<double>(local.rank_count());
}

void PrintJson(const Case& c, const Measured& m) {
  for (size_t a = 0; a < 3; ++a) {
    std::printf(
        "{\"scenario\":\"redistribution_intersections/%s/remote=%llu\",\"algorithm\":\"%s\","
        "\"metric\":\"time_per_rank\",\"value\":%.3f,\"unit\":\"us\",\"remote_ranks\":%llu,"
        "\"pieces_per_rank\":%.1f,\"ratio_vs_aspen\":%.2f,\"aspen_with_listing_us\":%.3f}\n",
        c.name, static_cast<unsigned long long>(m.remote_ranks),
        std::string(AlgorithmName(kAlgorithms[a])).c_str(), m.seconds[a] * 1e6,
        static_cast<unsigned long long>(m.remote_ranks), m.pieces, m.seconds[a] / m.seconds[0],
        m.aspen_listed * 1e6);
  }
}

void PrintSummary(const Case& c, const std::vector<Measured>& rows, bool json) {
  const double growth = rows.back().seconds[0] / rows.front().seconds[0];
  const Measured& at1024 = rows[3];
  const double speedup = at1024.seconds[1] / at1024.seconds[0];
  const double speedup_falls = at1024.seconds[2] / at1024.seconds[0];
  if (json) {
    std::printf(
        "{\"scenario\":\"redistribution_intersections/%s\",\"metric\":\"aspen_growth_16_to_4096\","
        "\"value\":%.2f,\"target\":\"<= 1.2\",\"speedup_vs_classical_at_1024\":%.1f,"
        "\"speedup_vs_falls_at_1024\":%.1f}\n",
        c.name, growth, speedup, speedup_falls);
    return;
  }
  std::printf(
      "  ASPEN growth 16->4096: %.2fx (target <= 1.2)   at 1024: %.1fx faster than "
      "classical (target >= 10), %.1fx faster than FALLS\n\n",
      growth, speedup, speedup_falls);
}

int Run(const Options& opt) {
  if (!opt.json) {
    std::printf(
        "Intersection time per local rank, %llux%llu global, local grid %llux%llu, "
        "best of %d batches\n\n",
        static_cast<unsigned long long>(opt.extent), static_cast<unsigned long long>(opt.extent),
        static_cast<unsigned long long>(kLocalGrid), static_cast<unsigned long long>(kLocalGrid),
        opt.batches);
  }
  bool all_agree = true;
  for (const Case& c : kCases) {
    const Distribution local = Make2D(opt.extent, c.local_block, kLocalGrid);
    if (!opt.json) {
      std::printf("%s\n  %6s %10s %13s %10s %10s %10s %8s %14s\n", c.name, "remote", "aspen us",
                  "classical us", "falls us", "cls/aspen", "falls/asp", "pieces", "aspen+list us");
    }
    std::vector<Measured> rows;
    for (uint64_t side : kRemoteSides) {
      const Distribution remote = Make2D(opt.extent, c.remote_block, side);
      Measured m{.remote_ranks = remote.rank_count(), .pieces = MeanPieces(local, remote)};
      if (!Agree(local, remote)) {
        std::fprintf(stderr, "%s remote %llu: the algorithms disagree\n", c.name,
                     static_cast<unsigned long long>(m.remote_ranks));
        all_agree = false;
      }
      for (size_t a = 0; a < 3; ++a) {
        m.seconds[a] = TimePerRank(local, remote, kAlgorithms[a], opt, false);
      }
      m.aspen_listed = TimePerRank(local, remote, Algorithm::kAspen, opt, true);
      rows.push_back(m);
      if (opt.json) {
        PrintJson(c, m);
      } else {
        std::printf("  %6llu %10.2f %13.2f %10.2f %10.1f %10.1f %8.0f %14.2f\n",
                    static_cast<unsigned long long>(m.remote_ranks), m.seconds[0] * 1e6,
                    m.seconds[1] * 1e6, m.seconds[2] * 1e6, m.seconds[1] / m.seconds[0],
                    m.seconds[2] / m.seconds[0], m.pieces, m.aspen_listed * 1e6);
      }
    }
    PrintSummary(c, rows, opt.json);
  }
  return all_agree ? 0 : 1;
}

int Main(int argc, char** argv) {
  CLI::App app{"redistribution_intersections: ASPEN vs classical vs FALLS, time per rank"};
  Options opt;
  app.add_option("--extent", opt.extent, "global size per dimension")
      ->check(CLI::Range(uint64_t{1}, uint64_t{1} << 32));
  app.add_option("--batches", opt.batches, "timed batches per figure; the best counts")
      ->check(CLI::Range(1, 101));
  app.add_option("--min-ms", opt.min_ms, "least time per batch, ms")->check(CLI::Range(0.0, 1e4));
  app.add_flag("--json", opt.json, "one JSON object per line");
  CLI11_PARSE(app, argc, argv);
  return Run(opt);
}

}  // namespace

int main(int argc, char** argv) {
  return isometry::RunMain("redistribution_intersections", 2, Main, argc, argv);
}
