#include "redistribution/exchange.h"

#include <algorithm>

#include "redistribution/algorithms.h"

namespace isometry::redistribution {

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAspen:
      return "aspen";
    case Algorithm::kClassical:
      return "classical";
    case Algorithm::kFalls:
      return "falls";
  }
  return "?";
}

uint64_t Piece::ElementCount(int dims) const {
  uint64_t n = 1;
  for (int d = 0; d < dims; ++d) {
    uint64_t in_dim = 0;
    for (const Run& r : runs[d]) in_dim += r.length;
    n *= in_dim;
  }
  return n;
}

uint64_t ExchangeSet::PieceCount() const {
  if (dims == 0) return 0;
  uint64_t n = 1;
  for (int d = 0; d < dims; ++d) n *= per_dim[d].coords.size();
  return n;
}

std::vector<Piece> ExchangeSet::Pieces() const {
  std::vector<Piece> out;
  if (empty()) return out;
  out.reserve(PieceCount());
  // An odometer over the non-empty coordinates of every dimension.
  std::array<size_t, kMaxDims> at{};
  for (;;) {
    Piece p;
    for (int d = 0; d < dims; ++d) {
      const CoordRuns& c = per_dim[d].coords[at[d]];
      p.remote_coords[d] = c.coord;
      p.runs[d] = per_dim[d].RunsOf(c);
    }
    p.remote_rank = RankOfCoords(p.remote_coords, remote_grid, dims, remote_order);
    out.push_back(p);
    int d = dims - 1;
    while (d >= 0 && ++at[d] == per_dim[d].coords.size()) at[d--] = 0;
    if (d < 0) break;
  }
  std::sort(out.begin(), out.end(),
            [](const Piece& a, const Piece& b) { return a.remote_rank < b.remote_rank; });
  return out;
}

DimExchange Canonicalize(std::vector<CoordRun>* raw) {
  std::sort(raw->begin(), raw->end(), [](const CoordRun& a, const CoordRun& b) {
    return a.coord != b.coord ? a.coord < b.coord : a.run.global < b.run.global;
  });
  DimExchange out;
  // At most one entry each per raw run: no regrowth, whose count would
  // depend on the number of remote coordinates.
  out.runs.reserve(raw->size());
  out.coords.reserve(raw->size());
  for (const CoordRun& cr : *raw) {
    if (cr.run.length == 0) continue;
    if (!out.coords.empty() && out.coords.back().coord == cr.coord) {
      Run& last = out.runs.back();
      if (last.global + last.length == cr.run.global) {
        last.length += cr.run.length;
        continue;
      }
      ++out.coords.back().count;
    } else {
      out.coords.push_back({.coord = cr.coord, .first = out.runs.size(), .count = 1});
    }
    out.runs.push_back(cr.run);
  }
  return out;
}

ExchangeSet EmptyExchange(const Distribution& remote) {
  ExchangeSet set;
  set.dims = remote.dims();
  set.remote_grid = remote.grid();
  set.remote_order = remote.order();
  return set;
}

void Finish(ExchangeSet* set) {
  for (int d = 0; d < set->dims; ++d) {
    if (!set->per_dim[d].coords.empty()) continue;
    for (DimExchange& e : set->per_dim) e = DimExchange{};
    return;
  }
}

ExchangeSet PairwiseExchange(const Distribution& local, const Index& local_coords,
                             const Distribution& remote, PairFn pair) {
  const int k = remote.dims();
  std::array<DimProblem, kMaxDims> problem{};
  std::array<std::vector<bool>, kMaxDims> seen;
  std::array<std::vector<CoordRun>, kMaxDims> raw;
  std::array<std::vector<Run>, kMaxDims> scratch;
  for (int d = 0; d < k; ++d) {
    problem[d] = {.local = local.dim(d), .local_coord = local_coords[d], .remote = remote.dim(d)};
    seen[d].assign(remote.dim(d).procs, false);
  }
  for (uint64_t r = 0; r < remote.rank_count(); ++r) {
    const Index c = remote.CoordsOf(r);
    int d = 0;
    for (; d < k; ++d) {
      scratch[d].clear();
      pair(problem[d], c[d], &scratch[d]);
      if (scratch[d].empty()) break;
    }
    if (d < k) continue;
    // Rank r shares a piece: record each dimension's runs once per coordinate.
    for (d = 0; d < k; ++d) {
      if (seen[d][c[d]]) continue;
      seen[d][c[d]] = true;
      for (const Run& run : scratch[d]) raw[d].push_back({.coord = c[d], .run = run});
    }
  }
  ExchangeSet set = EmptyExchange(remote);
  for (int d = 0; d < k; ++d) set.per_dim[d] = Canonicalize(&raw[d]);
  Finish(&set);
  return set;
}

Result<ExchangeSet> ComputeExchange(const Distribution& local, uint64_t local_rank,
                                    const Distribution& remote, Algorithm algorithm) {
  if (local.dims() != remote.dims() || local.extents() != remote.extents()) {
    return InvalidArgument("local distribution ", local.ToString(), " and remote distribution ",
                           remote.ToString(), " do not cover the same global index space");
  }
  if (local_rank >= local.rank_count()) {
    return OutOfRange("local rank ", local_rank, " is outside [0, ", local.rank_count(), ")");
  }
  const Index coords = local.CoordsOf(local_rank);
  switch (algorithm) {
    case Algorithm::kAspen:
      return AspenExchange(local, coords, remote);
    case Algorithm::kClassical:
      return PairwiseExchange(local, coords, remote, &ClassicalPair);
    case Algorithm::kFalls:
      return PairwiseExchange(local, coords, remote, &FallsPair);
  }
  return InvalidArgument("unknown intersection algorithm ", static_cast<int>(algorithm));
}

}  // namespace isometry::redistribution
