// Who sends what to whom in an M:N redistribution (issue #18): for one rank
// of a local distribution, the pieces of its data each rank of a remote
// distribution of the same global index space holds too.
//
// The intersection of two block-cyclic distributions is separable: an
// element belongs to (local rank, remote rank) exactly when, in every
// dimension, its index belongs to both ranks' grid coordinates there. So the
// exchange set is kept factored: per dimension, per remote grid coordinate,
// the sorted runs of global indices it shares with the local rank. The piece
// for remote rank r with coordinates (c_0, ..., c_k-1) is the Cartesian
// product of the run lists of c_0 in dimension 0, ..., c_k-1 in dimension
// k-1; it is empty when any of them is. Listing the pieces costs their
// number, which is the size of the answer; computing the factored form is
// what the algorithms below differ in.
//
// Three algorithms compute the same canonical set (runs sorted by global
// index, adjacent runs merged, coordinates sorted, every dimension empty as
// soon as one is), so their results compare with ==:
//  - kAspen (Adjacent Shifting of PEriodic Node data): per dimension, walks
//    the local blocks once; where a local block starts within the remote
//    block pattern follows from the previous local block by the constant
//    local period (local block periodicity), the first remote owner and its
//    local offset come from that position modulo the remote block and
//    period (remote block periodicity), and each following piece of the
//    local block goes to the next remote coordinate (adjacency shifting).
//    No loop over remote ranks or remote blocks: its cost per dimension is
//    the local block count plus the number of runs produced.
//  - kClassical: for every remote rank, in every dimension, compares every
//    local block with every block of that remote rank.
//  - kFalls: for every remote rank, in every dimension, intersects the two
//    FAmiLies of Line Segments (a block-cyclic pattern is a family: first
//    block, block length, stride) within one common period, the least
//    common multiple of the two strides, with one forward sweep, then
//    repeats that period's segments over the extent.
// Pure functions of their inputs: thread-safe.
#pragma once

#include <span>
#include <string_view>
#include <vector>

#include "redistribution/distribution.h"

namespace isometry::redistribution {

enum class Algorithm : uint8_t { kAspen, kClassical, kFalls };
std::string_view AlgorithmName(Algorithm a);  // "aspen", "classical", "falls"

// Consecutive global indices [global, global + length) in one dimension,
// held by the local rank at [local, local + length) and by the remote rank
// at [remote, remote + length) of their local index spaces.
struct Run {
  uint64_t global = 0;
  uint64_t length = 0;
  uint64_t local = 0;
  uint64_t remote = 0;
  friend bool operator==(const Run&, const Run&) = default;
};

// The runs of remote grid coordinate `coord`: DimExchange::runs[first,
// first + count).
struct CoordRuns {
  uint64_t coord = 0;
  uint64_t first = 0;
  uint64_t count = 0;
  friend bool operator==(const CoordRuns&, const CoordRuns&) = default;
};

// One dimension of the factored set: only coordinates sharing something.
struct DimExchange {
  std::vector<Run> runs;          // grouped by coordinate, sorted by global
  std::vector<CoordRuns> coords;  // sorted by coord
  std::span<const Run> RunsOf(const CoordRuns& c) const {
    return std::span<const Run>(runs).subspan(c.first, c.count);
  }
  friend bool operator==(const DimExchange&, const DimExchange&) = default;
};

// What the local rank shares with one remote rank: the Cartesian product of
// `runs[0]` x ... x `runs[dims - 1]`. Views into its ExchangeSet.
struct Piece {
  uint64_t remote_rank = 0;
  Index remote_coords{};
  std::array<std::span<const Run>, kMaxDims> runs{};
  uint64_t ElementCount(int dims) const;
};

struct ExchangeSet {
  int dims = 0;
  Index remote_grid{};
  GridOrder remote_order = GridOrder::kRowMajor;
  std::array<DimExchange, kMaxDims> per_dim{};

  bool empty() const { return dims == 0 || per_dim[0].coords.empty(); }
  // How many remote ranks receive something: the product of the per-dim
  // coordinate counts.
  uint64_t PieceCount() const;
  // Every non-empty piece, sorted by remote rank; views into *this.
  std::vector<Piece> Pieces() const;
  friend bool operator==(const ExchangeSet&, const ExchangeSet&) = default;
};

// The exchange set of rank `local_rank` of `local` with every rank of
// `remote`. INVALID_ARGUMENT when the two distributions do not cover the
// same global index space (rank or extents differ), OUT_OF_RANGE when
// local_rank is not a rank of `local`. Either side may be the producer.
Result<ExchangeSet> ComputeExchange(const Distribution& local, uint64_t local_rank,
                                    const Distribution& remote, Algorithm algorithm);

}  // namespace isometry::redistribution
