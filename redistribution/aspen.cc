// ASPEN (Adjacent Shifting of PEriodic Node data), after the UDJ paper
// (seed 003, Sect. 4.4): one pass over the local blocks of each dimension,
// never over remote ranks or remote blocks.
#include <algorithm>

#include "redistribution/algorithms.h"

namespace isometry::redistribution {
namespace {

// Where a global index sits in the remote block pattern: its offset in its
// remote block, that block's owner coordinate, and how many full remote
// periods (block * procs) precede it, so the remote local index is
// cycle * block + offset.
struct RemotePos {
  uint64_t offset = 0;
  uint64_t coord = 0;
  uint64_t cycle = 0;
};

// *x = (*x + step) mod `mod` for *x, step < mod, without overflowing when
// mod is near 2^64; true when it wrapped.
bool AddMod(uint64_t* x, uint64_t step, uint64_t mod) {
  if (*x >= mod - step) {
    *x -= mod - step;
    return true;
  }
  *x += step;
  return false;
}

}  // namespace

void AspenDim(const DimProblem& p, std::vector<CoordRun>* out) {
  const DimMap& lm = p.local;
  const DimMap& rm = p.remote;
  const uint64_t blocks = lm.LocalBlocks(p.local_coord);
  if (blocks == 0) return;
  // Local block periodicity: consecutive local blocks start one local period
  // apart, so the next block's remote position is this one's advanced by a
  // constant step, computed once.
  const uint64_t period = lm.block * lm.procs;
  const uint64_t step_blocks = period / rm.block;
  const uint64_t step_offset = period % rm.block;
  const uint64_t step_coord = step_blocks % rm.procs;
  const uint64_t step_cycle = step_blocks / rm.procs;
  // Remote block periodicity: the first block's remote owner and offset
  // come from its start modulo the remote block and period.
  uint64_t start = p.local_coord * lm.block;
  const uint64_t first_block = start / rm.block;
  RemotePos at{
      .offset = start % rm.block, .coord = first_block % rm.procs, .cycle = first_block / rm.procs};
  for (uint64_t i = 0; i < blocks; ++i) {
    // Written so that extents near 2^64 cannot wrap.
    const uint64_t end = start + std::min(lm.block, lm.extent - start);
    uint64_t pos = start;
    uint64_t local = i * lm.block;
    // Adjacency shifting: the local block's first piece goes to at.coord,
    // each following one to the next remote coordinate.
    RemotePos r = at;
    while (pos < end) {
      const uint64_t len = std::min(rm.block - r.offset, end - pos);
      out->push_back({.coord = r.coord,
                      .run = {.global = pos,
                              .length = len,
                              .local = local,
                              .remote = r.cycle * rm.block + r.offset}});
      pos += len;
      local += len;
      r.offset = 0;
      if (++r.coord == rm.procs) {
        r.coord = 0;
        ++r.cycle;
      }
    }
    if (i + 1 == blocks) break;
    // The next local block: one local period further in the remote pattern.
    start += period;
    const bool carry = AddMod(&at.offset, step_offset, rm.block);
    const bool wrap = AddMod(&at.coord, step_coord, rm.procs);
    const bool wrap_carry = carry && AddMod(&at.coord, 1, rm.procs);
    at.cycle += step_cycle + (wrap ? 1 : 0) + (wrap_carry ? 1 : 0);
  }
}

ExchangeSet AspenExchange(const Distribution& local, const Index& local_coords,
                          const Distribution& remote) {
  ExchangeSet set = EmptyExchange(remote);
  std::vector<CoordRun> raw;
  for (int d = 0; d < remote.dims(); ++d) {
    raw.clear();
    AspenDim({.local = local.dim(d), .local_coord = local_coords[d], .remote = remote.dim(d)},
             &raw);
    if (raw.empty()) break;  // nothing shared in this dimension: nothing at all
    set.per_dim[d] = Canonicalize(&raw);
  }
  Finish(&set);
  return set;
}

}  // namespace isometry::redistribution
