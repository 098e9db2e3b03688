#include "planner/block_constraints.h"

#include <cmath>

namespace isometry::full_planner_internal {

BlockSystem::BlockSystem(const Box& bounds, uint64_t field_bytes, const std::vector<Shape>& cands)
    : dims_(bounds.dims), log_fb_(std::log2(static_cast<double>(field_bytes))) {
  for (int d = 0; d < dims_; ++d) {
    const size_t dd = static_cast<size_t>(d);
    const uint64_t e = static_cast<uint64_t>(bounds.extent(d));
    extent_[dd] = e;
    log_extent_[dd] = std::log2(static_cast<double>(e));
    bool variable = false;
    for (const Shape& s : cands) {
      variable = variable || s.SplitBlock(d) == 0;
    }
    if (!variable) {
      continue;
    }
    int v = 0;
    while (v < kMaxVar && (uint64_t{1} << v) < e) {
      ++v;
    }
    vmax_[dd] = v;
    for (int k = 0; k <= v; ++k) {
      const uint64_t c = static_cast<uint64_t>(BlockFor(k, static_cast<int64_t>(e)));
      const uint64_t outs = CeilDiv(e, c);
      const size_t kk = static_cast<size_t>(k);
      lin_[dd][kk] = std::log2(static_cast<double>(c));
      lout_[dd][kk] = std::log2(static_cast<double>(outs));
      lboth_[dd][kk] = std::log2(static_cast<double>(SatMul(c, outs)));
    }
  }
}

Expr BlockSystem::MakeExpr(const Shape& ra, int from, int to) const {
  Expr e;
  for (int i = from; i < to; ++i) {
    const Atom& x = ra[i];
    const size_t d = static_cast<uint8_t>(x.dim);  // 0 <= dim < kMaxDims
    switch (x.kind) {
      case AtomKind::kF:
        e.c += log_fb_;
        break;
      case AtomKind::kWhole:
        e.c += log_extent_[d];
        break;
      case AtomKind::kIn:
        if (x.block > 0) {
          e.c += std::log2(static_cast<double>(x.block));
        } else {
          e.mask[d] |= 1;
        }
        break;
      case AtomKind::kOut:
        if (x.block > 0) {
          e.c +=
              std::log2(static_cast<double>(CeilDiv(extent_[d], static_cast<uint64_t>(x.block))));
        } else {
          e.mask[d] |= 2;
        }
        break;
    }
  }
  return e;
}

// Bounds propagation over integer domains: each constraint sign * (sum of
// monotone terms) >= sign * rhs narrows every variable it mentions to the
// values that can still satisfy it given the others' best values.
bool BlockSystem::Propagate(const Constraint* cs, int n, Values& lo, Values& hi) const {
  for (int round = 0; round < 4 * (kMaxVar + 1); ++round) {
    bool changed = false;
    for (int k = 0; k < n; ++k) {
      const Constraint& c = cs[k];
      std::array<double, kMaxDims> best{};
      double total = c.sign * c.e.c;
      for (int d = 0; d < dims_; ++d) {
        const size_t dd = static_cast<size_t>(d);
        const uint8_t m = c.e.mask[dd];
        if (!m) {
          continue;
        }
        const bool increasing = (m != 2) == (c.sign > 0);
        best[dd] = c.sign * Term(d, m, increasing ? hi[dd] : lo[dd]);
        total += best[dd];
      }
      const double target = c.sign * c.rhs;
      if (total < target - kEps) {
        return false;
      }
      for (int d = 0; d < dims_; ++d) {
        const size_t dd = static_cast<size_t>(d);
        const uint8_t m = c.e.mask[dd];
        if (!m) {
          continue;
        }
        const double need = target - (total - best[dd]) - kEps;
        if ((m != 2) == (c.sign > 0)) {
          while (lo[dd] <= hi[dd] && c.sign * Term(d, m, lo[dd]) < need) {
            ++lo[dd];
            changed = true;
          }
        } else {
          while (hi[dd] >= lo[dd] && c.sign * Term(d, m, hi[dd]) < need) {
            --hi[dd];
            changed = true;
          }
        }
        if (lo[dd] > hi[dd]) {
          return false;
        }
      }
    }
    if (!changed) {
      return true;
    }
  }
  return true;
}

// Exact: propagation, then splitting the widest domain (smaller blocking
// factors first, which keeps buffers and chunks small).
bool BlockSystem::Solve(const Constraint* cs, int n, Values& lo, Values& hi) const {
  if (!Propagate(cs, n, lo, hi)) {
    return false;
  }
  int pick = -1;
  for (int d = 0; d < dims_; ++d) {
    const size_t dd = static_cast<size_t>(d);
    if (lo[dd] < hi[dd] && (pick < 0 || hi[dd] - lo[dd] > hi[static_cast<size_t>(pick)] -
                                                              lo[static_cast<size_t>(pick)])) {
      pick = d;
    }
  }
  if (pick < 0) {
    return true;
  }
  const size_t p = static_cast<size_t>(pick);
  const int mid = lo[p] + (hi[p] - lo[p]) / 2;
  Values lo2 = lo, hi2 = hi;
  hi2[p] = mid;
  if (Solve(cs, n, lo2, hi2)) {
    lo = lo2;
    hi = hi2;
    return true;
  }
  lo[p] = mid + 1;
  return Solve(cs, n, lo, hi);
}

}  // namespace isometry::full_planner_internal
