// Constraints over blocking factors (internal to the full planner; the model
// is in full_planner.h). One variable per dimension, v = log2 of its blocking
// factor in [0, vmax[d]]; a hop's PREFIX and SUFFIX̄ become sums of log2
// sizes, and each throughput or space constraint a bound on one such sum.
// Every term is monotone in its variable, so bounds propagation with
// branching solves a system exactly.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "core/box.h"
#include "planner/shape_algebra.h"

namespace isometry::full_planner_internal {

constexpr double kEps = 1e-9;  // slack of comparisons between sums of log2s

// Sums of log2 sizes: a constant plus, per dimension, the terms of its
// variable: mask 1 = x_in (log2 c, increasing in v), 2 = x_out (log2 of
// ceil(E / c), decreasing), 3 = both (log2 of the padded extent, increasing).
struct Expr {
  double c = 0;
  std::array<uint8_t, kMaxDims> mask{};
};

struct Constraint {
  Expr e;
  double sign = 1;  // +1: e >= rhs; -1: e <= rhs
  double rhs = 0;
};

// One value (or one bound) per variable.
using Values = std::array<int, kMaxDims>;

// The variables of one request and the log2 sizes of their terms. A value
// type; every method is const.
class BlockSystem {
 public:
  BlockSystem() = default;
  // The variables of `bounds` that some shape in `cands` leaves free (a
  // blocking factor of 0); the others are fixed at vmax = 0.
  BlockSystem(const Box& bounds, uint64_t field_bytes, const std::vector<Shape>& cands);

  // The largest value of each variable: the first whose factor covers the
  // extent.
  const Values& vmax() const { return vmax_; }

  // The sum of sizes of ra[from, to) in log2.
  Expr MakeExpr(const Shape& ra, int from, int to) const;

  double Term(int d, uint8_t mask, int v) const {
    const size_t dd = static_cast<size_t>(d), vv = static_cast<size_t>(v);
    return mask == 1 ? lin_[dd][vv] : mask == 2 ? lout_[dd][vv] : lboth_[dd][vv];
  }
  // The largest and smallest value of `e` over the domains [lo, hi].
  double Max(const Expr& e, const Values& lo, const Values& hi) const {
    double s = e.c;
    for (int d = 0; d < dims_; ++d) {
      const uint8_t m = e.mask[static_cast<size_t>(d)];
      if (m) {
        s += Term(d, m, m == 2 ? lo[static_cast<size_t>(d)] : hi[static_cast<size_t>(d)]);
      }
    }
    return s;
  }
  double Min(const Expr& e, const Values& lo, const Values& hi) const {
    double s = e.c;
    for (int d = 0; d < dims_; ++d) {
      const uint8_t m = e.mask[static_cast<size_t>(d)];
      if (m) {
        s += Term(d, m, m == 2 ? hi[static_cast<size_t>(d)] : lo[static_cast<size_t>(d)]);
      }
    }
    return s;
  }

  // Narrows [lo, hi] to values that can still satisfy cs[0, n); false when
  // some constraint cannot hold. A relaxation: what is left need not
  // contain a solution.
  bool Propagate(const Constraint* cs, int n, Values& lo, Values& hi) const;
  // Exact: true with lo == hi a solution of cs[0, n) (the smallest blocking
  // factors first), false when there is none.
  bool Solve(const Constraint* cs, int n, Values& lo, Values& hi) const;

 private:
  int dims_ = 0;
  double log_fb_ = 0;
  std::array<uint64_t, kMaxDims> extent_{};
  std::array<double, kMaxDims> log_extent_{};
  Values vmax_{};
  std::array<std::array<double, kMaxVar + 1>, kMaxDims> lin_{}, lout_{}, lboth_{};
};

}  // namespace isometry::full_planner_internal
