// The three intersection algorithms behind ComputeExchange (exchange.h) and
// the pieces they share. Internal to redistribution/: callers validate the
// two distributions (same global space, local coordinates in range) first.
#pragma once

#include <vector>

#include "redistribution/exchange.h"

namespace isometry::redistribution {

// One dimension of the problem: the local rank's grid coordinate in it and
// both sides' maps (same extent).
struct DimProblem {
  DimMap local;
  uint64_t local_coord = 0;
  DimMap remote;
};

// A run not yet grouped: which remote coordinate it belongs to.
struct CoordRun {
  uint64_t coord = 0;
  Run run;
};

// Groups `raw` by coordinate, sorts by global index and merges adjacent
// runs (adjacent global indices on the same two coordinates are adjacent
// in both local index spaces too). Reorders *raw.
DimExchange Canonicalize(std::vector<CoordRun>* raw);

// An empty set shaped for `remote`; Finish() empties every dimension when
// one is empty, so that equal piece sets compare equal.
ExchangeSet EmptyExchange(const Distribution& remote);
void Finish(ExchangeSet* set);

// ASPEN, per dimension; appends in global order.
void AspenDim(const DimProblem& p, std::vector<CoordRun>* out);
// Classical and FALLS: what the local coordinate shares with remote
// coordinate `remote_coord`, appended to *out in any order.
void ClassicalPair(const DimProblem& p, uint64_t remote_coord, std::vector<Run>* out);
void FallsPair(const DimProblem& p, uint64_t remote_coord, std::vector<Run>* out);

ExchangeSet AspenExchange(const Distribution& local, const Index& local_coords,
                          const Distribution& remote);
// Every remote rank in turn, every dimension in turn with `pair`, stopping
// at the first empty dimension (the shape of the classical and FALLS
// algorithms: their cost grows with the remote rank count).
using PairFn = void (*)(const DimProblem&, uint64_t, std::vector<Run>*);
ExchangeSet PairwiseExchange(const Distribution& local, const Index& local_coords,
                             const Distribution& remote, PairFn pair);

}  // namespace isometry::redistribution
