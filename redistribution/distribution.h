// Distributed arrays for M:N redistribution (issue #18): a k-d global index
// space (k <= 4) spread over a process grid, one distribution per dimension.
//
// Every supported distribution is block-cyclic in disguise, and this file
// reduces it to that once, at validation: BLOCK over p processes is
// BLOCK_CYCLIC(ceil(n / p)) (the HPF / ScaLAPACK convention, so trailing
// ranks may own nothing), CYCLIC is BLOCK_CYCLIC(1). Global block j of a
// dimension belongs to grid coordinate j mod p; on its owner it sits at
// local block j div p, so a rank's local indices in a dimension are the
// concatenation of its blocks in global order.
//
// Ranks are numbered from grid coordinates in row-major order (the last
// dimension varies fastest, as MPI_Cart_create) or column-major order (the
// first varies fastest, as a BLACS grid with order 'C').
//
// Everything here is a pure value type: thread-safe to share once built.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/status.h"

namespace isometry::redistribution {

inline constexpr int kMaxDims = 4;
// A multi-index; entries past the distribution's rank are 0.
using Index = std::array<uint64_t, kMaxDims>;

enum class DistKind : uint8_t { kBlock, kCyclic, kBlockCyclic };

struct DimDistribution {
  DistKind kind = DistKind::kBlock;
  uint64_t block = 0;  // read only for kBlockCyclic; must be > 0 there

  static DimDistribution Block() { return {DistKind::kBlock, 0}; }
  static DimDistribution Cyclic() { return {DistKind::kCyclic, 0}; }
  static DimDistribution BlockCyclic(uint64_t b) { return {DistKind::kBlockCyclic, b}; }
};

enum class GridOrder : uint8_t { kRowMajor, kColumnMajor };

// What a user asks for; Distribution::Make validates it. The three vectors
// have one entry per dimension.
struct DistributionSpec {
  std::vector<uint64_t> extents;       // global size per dimension, > 0
  std::vector<DimDistribution> dists;  // distribution per dimension
  std::vector<uint64_t> grid;          // processes per dimension, > 0
  GridOrder order = GridOrder::kRowMajor;
};

// One dimension reduced to block-cyclic: `extent` indices in blocks of
// `block` dealt round-robin to `procs` grid coordinates. Unchecked: callers
// pass indices < extent and coordinates < procs (Distribution guarantees
// block * procs does not overflow).
struct DimMap {
  uint64_t extent = 0;
  uint64_t block = 0;
  uint64_t procs = 0;

  uint64_t Owner(uint64_t g) const { return (g / block) % procs; }
  // g's position among its owner's indices.
  uint64_t Local(uint64_t g) const { return (g / (block * procs)) * block + g % block; }
  // The global index of `local` on coordinate `coord`.
  uint64_t Global(uint64_t coord, uint64_t local) const {
    return ((local / block) * procs + coord) * block + local % block;
  }
  // How many indices coordinate `coord` owns (ScaLAPACK's NUMROC).
  uint64_t LocalExtent(uint64_t coord) const;
  // How many blocks coordinate `coord` owns, the last possibly partial.
  uint64_t LocalBlocks(uint64_t coord) const;
  friend bool operator==(const DimMap&, const DimMap&) = default;
};

// The rank of grid coordinates `coords` in a grid of `dims` dimensions.
uint64_t RankOfCoords(const Index& coords, const Index& grid, int dims, GridOrder order);

class Distribution {
 public:
  // Errors (INVALID_ARGUMENT, naming the dimension and value): no
  // dimensions or more than kMaxDims, vectors of different lengths, a zero
  // extent, grid size or block, an element count, rank count or block
  // period (block * processes) that overflows 64 bits.
  static Result<Distribution> Make(const DistributionSpec& spec);

  int dims() const { return dims_; }
  uint64_t rank_count() const { return ranks_; }
  GridOrder order() const { return order_; }
  const DimMap& dim(int d) const { return maps_[d]; }
  Index grid() const;
  Index extents() const;
  uint64_t element_count() const;

  // Grid coordinates of `rank` (< rank_count()) and back.
  Index CoordsOf(uint64_t rank) const;
  uint64_t RankOf(const Index& coords) const { return RankOfCoords(coords, grid(), dims_, order_); }

  // The rank owning global index `global`, its position in that rank's local
  // index space, and a rank's local extents. OUT_OF_RANGE for an index or
  // rank outside the distribution.
  Result<uint64_t> Owner(const Index& global) const;
  Result<Index> LocalIndex(const Index& global) const;
  Result<Index> LocalExtent(uint64_t rank) const;

  // "[100x60] BLOCK_CYCLIC(8)xBLOCK over 2x3 row-major", for messages.
  std::string ToString() const;

  friend bool operator==(const Distribution&, const Distribution&) = default;

 private:
  Distribution() = default;
  Status CheckIndex(const Index& global) const;

  int dims_ = 0;
  std::array<DimMap, kMaxDims> maps_{};
  std::array<DistKind, kMaxDims> kinds_{};
  GridOrder order_ = GridOrder::kRowMajor;
  uint64_t ranks_ = 0;
};

}  // namespace isometry::redistribution
