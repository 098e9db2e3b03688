#include "redistribution/distribution.h"

#include "core/checked.h"

namespace isometry::redistribution {
namespace {

const char* KindName(DistKind k) {
  switch (k) {
    case DistKind::kBlock:
      return "BLOCK";
    case DistKind::kCyclic:
      return "CYCLIC";
    case DistKind::kBlockCyclic:
      return "BLOCK_CYCLIC";
  }
  return "?";
}

std::string Join(const std::vector<uint64_t>& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) StrAppend(&out, i ? "x" : "", v[i]);
  return out;
}

// Reduces one dimension to block-cyclic; `d` names it in errors.
Result<DimMap> MakeDim(int d, uint64_t extent, const DimDistribution& dist, uint64_t procs) {
  if (extent == 0) return InvalidArgument("dimension ", d, ": global extent is 0");
  if (procs == 0) return InvalidArgument("dimension ", d, ": process grid size is 0");
  DimMap m{.extent = extent, .block = 0, .procs = procs};
  switch (dist.kind) {
    case DistKind::kBlock:
      m.block = extent / procs + (extent % procs != 0 ? 1 : 0);
      break;
    case DistKind::kCyclic:
      m.block = 1;
      break;
    case DistKind::kBlockCyclic:
      if (dist.block == 0) {
        return InvalidArgument("dimension ", d, ": BLOCK_CYCLIC block size is 0");
      }
      m.block = dist.block;
      break;
    default:
      return InvalidArgument("dimension ", d, ": unknown distribution kind ",
                             static_cast<int>(dist.kind));
  }
  // Local() and the intersection algorithms multiply block by procs.
  if (!CheckedMul(m.block, procs)) {
    return InvalidArgument("dimension ", d, ": block ", m.block, " times ", procs,
                           " processes overflows 64 bits");
  }
  return m;
}

}  // namespace

uint64_t DimMap::LocalBlocks(uint64_t coord) const {
  const uint64_t nblocks = extent / block + (extent % block != 0 ? 1 : 0);
  return nblocks / procs + (coord < nblocks % procs ? 1 : 0);
}

uint64_t DimMap::LocalExtent(uint64_t coord) const {
  const uint64_t owned = LocalBlocks(coord);
  if (owned == 0) return 0;
  const uint64_t nblocks = extent / block + (extent % block != 0 ? 1 : 0);
  if ((nblocks - 1) % procs != coord) return owned * block;
  // This coordinate holds the last block, which may be partial.
  const uint64_t last = extent - (nblocks - 1) * block;
  return (owned - 1) * block + last;
}

uint64_t RankOfCoords(const Index& coords, const Index& grid, int dims, GridOrder order) {
  uint64_t rank = 0;
  if (order == GridOrder::kRowMajor) {
    for (int d = 0; d < dims; ++d) rank = rank * grid[d] + coords[d];
  } else {
    for (int d = dims - 1; d >= 0; --d) rank = rank * grid[d] + coords[d];
  }
  return rank;
}

Result<Distribution> Distribution::Make(const DistributionSpec& spec) {
  const size_t k = spec.extents.size();
  if (k == 0) return InvalidArgument("distribution has no dimensions");
  if (k > static_cast<size_t>(kMaxDims)) {
    return InvalidArgument("distribution has ", k, " dimensions; at most ", kMaxDims,
                           " are supported");
  }
  if (spec.dists.size() != k || spec.grid.size() != k) {
    return InvalidArgument("distribution has ", k, " extents but ", spec.dists.size(),
                           " per-dimension distributions and a ", spec.grid.size(),
                           "-dimensional process grid");
  }
  if (spec.order != GridOrder::kRowMajor && spec.order != GridOrder::kColumnMajor) {
    return InvalidArgument("unknown grid order ", static_cast<int>(spec.order));
  }
  Distribution out;
  out.dims_ = static_cast<int>(k);
  out.order_ = spec.order;
  uint64_t elements = 1;
  uint64_t ranks = 1;
  for (int d = 0; d < out.dims_; ++d) {
    ISO_ASSIGN_OR_RETURN(out.maps_[d], MakeDim(d, spec.extents[d], spec.dists[d], spec.grid[d]));
    out.kinds_[d] = spec.dists[d].kind;
    const auto e = CheckedMul(elements, spec.extents[d]);
    if (!e) return InvalidArgument("global extents ", Join(spec.extents), " overflow 64 bits");
    const auto r = CheckedMul(ranks, spec.grid[d]);
    if (!r) return InvalidArgument("process grid ", Join(spec.grid), " overflows 64 bits");
    elements = *e;
    ranks = *r;
  }
  out.ranks_ = ranks;
  return out;
}

Index Distribution::grid() const {
  Index g{};
  for (int d = 0; d < dims_; ++d) g[d] = maps_[d].procs;
  return g;
}

Index Distribution::extents() const {
  Index e{};
  for (int d = 0; d < dims_; ++d) e[d] = maps_[d].extent;
  return e;
}

uint64_t Distribution::element_count() const {
  uint64_t n = 1;
  for (int d = 0; d < dims_; ++d) n *= maps_[d].extent;
  return n;
}

Index Distribution::CoordsOf(uint64_t rank) const {
  Index c{};
  if (order_ == GridOrder::kRowMajor) {
    for (int d = dims_ - 1; d >= 0; --d) {
      c[d] = rank % maps_[d].procs;
      rank /= maps_[d].procs;
    }
  } else {
    for (int d = 0; d < dims_; ++d) {
      c[d] = rank % maps_[d].procs;
      rank /= maps_[d].procs;
    }
  }
  return c;
}

Status Distribution::CheckIndex(const Index& global) const {
  for (int d = 0; d < dims_; ++d) {
    if (global[d] >= maps_[d].extent) {
      return OutOfRange("global index ", global[d], " in dimension ", d, " is outside [0, ",
                        maps_[d].extent, ")");
    }
  }
  return OkStatus();
}

Result<uint64_t> Distribution::Owner(const Index& global) const {
  ISO_RETURN_IF_ERROR(CheckIndex(global));
  Index c{};
  for (int d = 0; d < dims_; ++d) c[d] = maps_[d].Owner(global[d]);
  return RankOf(c);
}

Result<Index> Distribution::LocalIndex(const Index& global) const {
  ISO_RETURN_IF_ERROR(CheckIndex(global));
  Index l{};
  for (int d = 0; d < dims_; ++d) l[d] = maps_[d].Local(global[d]);
  return l;
}

Result<Index> Distribution::LocalExtent(uint64_t rank) const {
  if (rank >= ranks_) return OutOfRange("rank ", rank, " is outside [0, ", ranks_, ")");
  const Index c = CoordsOf(rank);
  Index e{};
  for (int d = 0; d < dims_; ++d) e[d] = maps_[d].LocalExtent(c[d]);
  return e;
}

std::string Distribution::ToString() const {
  std::string out = "[";
  for (int d = 0; d < dims_; ++d) StrAppend(&out, d ? "x" : "", maps_[d].extent);
  out += "] ";
  for (int d = 0; d < dims_; ++d) {
    StrAppend(&out, d ? "x" : "", KindName(kinds_[d]));
    if (kinds_[d] == DistKind::kBlockCyclic) StrAppend(&out, "(", maps_[d].block, ")");
  }
  out += " over ";
  for (int d = 0; d < dims_; ++d) StrAppend(&out, d ? "x" : "", maps_[d].procs);
  out += order_ == GridOrder::kRowMajor ? " row-major" : " column-major";
  return out;
}

}  // namespace isometry::redistribution
