// The paths a copy could have taken, weighed under the cost model beside
// the one it runs, each with why it was not taken (ExplainPlan's and
// `isoctl explain`'s alternatives).
//
// Candidates are the memory sequences from the source to the destination
// with at most kAlternativeHops hops that stage only in host or GPU
// memories of the ends' nodes (DSK and PROCESS memories are endpoints
// only), shortest first, at most kAlternativeCandidates of them. Each gets
// the layouts the simple algorithm gives a path (its one conversion on the
// first Memcpy hop, or on a Memcpy self-loop it adds) and is evaluated as
// EvaluatePath does. The full algorithm may also have weighed a candidate's
// memories with blocked intermediate layouts; what is shown is the
// candidate under the simple layouts, so a full plan can beat every
// candidate through the same memories.
//
// Pure function of its inputs; thread-safe.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "planner/planner.h"

namespace isometry {

inline constexpr int kAlternativeHops = 3;
inline constexpr size_t kAlternativeCandidates = 64;

struct PlanAlternative {
  // Evaluated where the model accepts it (predicted_bps > 0); otherwise the
  // path as built, or, where no layouts could be placed, only its memories
  // and channels.
  Path path;
  bool chosen = false;  // the path the copy runs (or would run)
  // Chosen: what limits it. Otherwise: the constraint or rule that ruled
  // it out ("slower: ...", "space: ...", "not weighed: ...").
  std::string verdict;
};

struct AlternativesRequest {
  const Path* chosen = nullptr;  // evaluated as the copy planned it
  Box bounds;
  uint64_t field_bytes = 0;
  uint64_t element_bytes = 1;
  bool durable = true;  // false: disk writes at their unsynced curve
  // Applied to every evaluated candidate as the copy's own path was
  // adjusted (a datatype copy's ends costed); may be empty.
  std::function<void(Path&)> adjust;
  size_t limit = 8;  // alternatives returned besides the chosen path
};

struct Alternatives {
  // The chosen path first, then the others by predicted rate, fastest
  // first, those the model rejects last; at most 1 + limit.
  std::vector<PlanAlternative> paths;
  size_t weighed = 0;  // candidates evaluated besides the chosen path
};

Alternatives WeighAlternatives(const Planner& planner, const AlternativesRequest& req);

// A rate as the verdicts give it ("5.94 GB/s"), for texts beside them.
std::string RateText(double bytes_per_s);

// What limits an evaluated path: its slowest hop and that hop's rate,
// what a pipelined pair of its Memcpy hops moves through their ring, or
// what its Memcpy hops share (full_planner.h, SHARED); "" when not
// evaluated.
std::string PathLimit(const Path& path, const Topology& topo);

}  // namespace isometry
