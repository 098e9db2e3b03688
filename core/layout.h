// Layouts (Isometry §2): how an instance's entries are linearized in memory.
//
// A layout is a vector of components, the first varying fastest:
//   F          the field space (appears exactly once)
//   x          a whole dimension
//   x_in=c     the inner part of a blocked dimension: c consecutive points
//   x_out      the outer part of a blocked dimension: which block
// Every dimension appears either whole or as an in/out pair (in before or
// after out; both orders are legal layouts).
//
// Blocking factors that do not divide the extent: x_out has ceil(|x| / c)
// blocks and the last block is padded to c points. The padding is part of
// the instance's storage (TOTAL counts it) but a copy never reads or writes
// it. This keeps every block the same size, so addressing stays affine.
//
// Components before F are scaled by each field's own size (a field's points
// are packed together); components after F are scaled by the whole entry
// block. Dimensions are named x, y, z, w (also d0..d3): x is dimension 0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/box.h"
#include "core/status.h"

namespace isometry {

struct LayoutComponent {
  enum class Kind : uint8_t { kFields, kDim, kDimIn, kDimOut };
  Kind kind = Kind::kFields;
  int dim = 0;        // for kDim, kDimIn, kDimOut
  int64_t block = 0;  // for kDimIn: the blocking factor c (>= 1)
  bool operator==(const LayoutComponent&) const = default;
};

class Layout {
 public:
  // Validates: F exactly once; every dimension 0..dims-1 covered exactly once
  // (whole, or in+out with the same dimension); blocks >= 1; no dimension
  // outside [0, dims).
  static Result<Layout> Make(std::vector<LayoutComponent> components, int dims);
  // Parses the text form, e.g. "F,x,y" or "x_in=4,F,x_out".
  static Result<Layout> Parse(std::string_view text, int dims);

  // Standard constructors. Row-major is C order (the last dimension varies
  // fastest); column-major is Fortran order (x fastest).
  static Layout RowMajor(int dims);     // AOS in C order: <F, d_{n-1}, ..., d_0>
  static Layout ColumnMajor(int dims);  // AOS in Fortran order: <F, d_0, ..., d_{n-1}>
  static Layout Aos(int dims) { return RowMajor(dims); }
  static Layout Soa(int dims);  // <d_{n-1}, ..., d_0, F>
  // Hybrid (AOSOA): blocks of `c` points of the fastest dimension per field.
  static Result<Layout> Hybrid(int dims, int64_t c);
  // Blocked: <F, ins..., outs...> with one block size per dimension
  // (fastest dimension first in both groups, C order).
  static Result<Layout> Blocked(std::vector<int64_t> blocks);

  const std::vector<LayoutComponent>& components() const {
    return components_ ? *components_ : kNoComponents;
  }
  int dims() const { return dims_; }
  // Index of the F component.
  size_t fields_position() const { return fields_pos_; }
  // Blocking factor of dimension d, or 0 when it is whole.
  int64_t block_of(int d) const;
  std::string ToString() const;
  bool operator==(const Layout& o) const {
    return dims_ == o.dims_ && fields_pos_ == o.fields_pos_ &&
           (components_ == o.components_ || components() == o.components());
  }
  // The same components, not only equal ones: a copy of this layout (or
  // of one it was copied from). Constant time.
  bool SharesListWith(const Layout& o) const {
    return components_ == o.components_ && dims_ == o.dims_;
  }

 private:
  static inline const std::vector<LayoutComponent> kNoComponents;
  // Immutable once made, so copies share it (a copy's layouts travel
  // through the node, the runtime and the plan cache's keys): null for a
  // default-made layout, which has none.
  std::shared_ptr<const std::vector<LayoutComponent>> components_;
  int dims_ = 0;
  size_t fields_pos_ = 0;
};

// Size |l(k)| of one component for an index space with the given extents and
// an entry of `field_bytes` bytes (Isometry §4.2): |F| = entry bytes,
// |x| = extent, |x_in=c| = c, |x_out| = ceil(extent / c).
uint64_t ComponentSize(const Layout& l, size_t index, const Box& bounds, uint64_t field_bytes);

// The layout algebra of Isometry §4.2. All sizes are products of component
// sizes; |F| counts bytes, so TOTAL is the instance's storage in bytes.
// A product that does not fit in 64 bits is UINT64_MAX (never a wrapped
// value), so an unvalidated layout over a large box reads as "too large".
uint64_t Total(const Layout& l, const Box& bounds, uint64_t field_bytes);
// Product of the longest common prefix: entries that may merge into one request.
uint64_t Prefix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes);
// Product of the longest common suffix.
uint64_t Suffix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes);
// TOTAL / SUFFIX: the shuffle size, a lower bound on buffers between two
// intermediate hops.
uint64_t SuffixBar(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes);

}  // namespace isometry
