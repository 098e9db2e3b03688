// The two baselines of the UDJ paper (seed 003, Sects. 4.2 and 4.3), one
// local and one remote grid coordinate at a time; PairwiseExchange
// (exchange.cc) runs them for every remote rank.
#include <algorithm>
#include <numeric>

#include "core/checked.h"
#include "redistribution/algorithms.h"

namespace isometry::redistribution {
namespace {

Run MakeRun(const DimProblem& p, uint64_t lo, uint64_t hi) {
  return {
      .global = lo, .length = hi - lo, .local = p.local.Local(lo), .remote = p.remote.Local(lo)};
}

// x + step, or `limit` when that reaches it: no wrap near 2^64.
uint64_t Advance(uint64_t x, uint64_t step, uint64_t limit) {
  return limit - x <= step ? limit : x + step;
}

}  // namespace

void ClassicalPair(const DimProblem& p, uint64_t remote_coord, std::vector<Run>* out) {
  const DimMap& lm = p.local;
  const DimMap& rm = p.remote;
  const uint64_t lblocks = lm.LocalBlocks(p.local_coord);
  const uint64_t rblocks = rm.LocalBlocks(remote_coord);
  for (uint64_t i = 0; i < lblocks; ++i) {
    const uint64_t ls = (i * lm.procs + p.local_coord) * lm.block;
    const uint64_t le = ls + std::min(lm.block, lm.extent - ls);
    for (uint64_t j = 0; j < rblocks; ++j) {
      const uint64_t rs = (j * rm.procs + remote_coord) * rm.block;
      const uint64_t re = rs + std::min(rm.block, rm.extent - rs);
      const uint64_t lo = std::max(ls, rs);
      const uint64_t hi = std::min(le, re);
      if (lo < hi) out->push_back(MakeRun(p, lo, hi));
    }
  }
}

void FallsPair(const DimProblem& p, uint64_t remote_coord, std::vector<Run>* out) {
  const DimMap& lm = p.local;
  const DimMap& rm = p.remote;
  const uint64_t extent = lm.extent;
  // Each side is a family of line segments: first segment at coord * block,
  // length block, stride block * procs.
  const uint64_t lstride = lm.block * lm.procs;
  const uint64_t rstride = rm.block * rm.procs;
  uint64_t ls = p.local_coord * lm.block;
  uint64_t rs = remote_coord * rm.block;
  if (ls >= extent || rs >= extent) return;
  // Both families repeat every lcm(strides), so does their intersection:
  // sweep one common period (or the extent, when shorter) and repeat.
  const uint64_t g = std::gcd(lstride, rstride);
  const auto lcm = CheckedMul(lstride / g, rstride);
  const uint64_t period = lcm ? *lcm : extent;
  const uint64_t window = std::min(period, extent);
  const size_t first = out->size();
  // One forward sweep: whichever segment ends first is done with.
  while (ls < window && rs < window) {
    const uint64_t le = ls + std::min(lm.block, window - ls);
    const uint64_t re = rs + std::min(rm.block, window - rs);
    const uint64_t lo = std::max(ls, rs);
    const uint64_t hi = std::min(le, re);
    if (lo < hi) out->push_back(MakeRun(p, lo, hi));
    if (le <= re) {
      ls = Advance(ls, lstride, window);
    } else {
      rs = Advance(rs, rstride, window);
    }
  }
  const size_t found = out->size() - first;
  if (found == 0 || window < period) return;
  for (uint64_t base = period;;) {
    // A segment cut at the period's end continues in the next period; the
    // canonical merge joins the two halves again.
    for (size_t s = 0; s < found; ++s) {
      const Run seg = (*out)[first + s];
      if (seg.global >= extent - base) break;
      const uint64_t lo = seg.global + base;
      out->push_back(MakeRun(p, lo, lo + std::min(seg.length, extent - lo)));
    }
    if (extent - base <= period) break;
    base += period;
  }
}

}  // namespace isometry::redistribution
