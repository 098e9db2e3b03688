// Shape algebra of the full planner (internal; see full_planner.h for the
// model): layouts whose blocking factors may be variables, their refinement
// against each other, the common prefix and suffix of a hop, and the
// candidate shapes for intermediate buffers. Pure functions over values.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/box.h"
#include "core/layout.h"
#include "core/status.h"

namespace isometry::full_planner_internal {

constexpr int kMaxAtoms = 1 + 2 * kMaxDims;
constexpr int kMaxVar = 63;  // blocking factors are 2^0 .. 2^63 (clamped to the extent)

inline uint64_t SatMul(uint64_t a, uint64_t b) {
  const unsigned __int128 p = static_cast<unsigned __int128>(a) * b;
  return p > std::numeric_limits<uint64_t>::max() ? std::numeric_limits<uint64_t>::max()
                                                  : static_cast<uint64_t>(p);
}

inline uint64_t CeilDiv(uint64_t a, uint64_t b) { return a / b + (a % b != 0); }

enum class AtomKind : uint8_t { kF, kWhole, kIn, kOut };

struct Atom {
  AtomKind kind = AtomKind::kF;
  int8_t dim = 0;
  // kIn / kOut: the blocking factor; 0 is the path's variable for `dim`.
  int64_t block = 0;
  // `dim` as an array index (dims are 0 .. kMaxDims - 1, never negative).
  size_t dim_index() const { return static_cast<uint8_t>(dim); }
  bool operator==(const Atom&) const = default;
};

struct Shape {
  std::array<Atom, kMaxAtoms> at{};
  int n = 0;

  void Push(Atom a) { at[static_cast<size_t>(n++)] = a; }
  const Atom& operator[](int i) const { return at[static_cast<size_t>(i)]; }
  bool operator==(const Shape& o) const {
    return n == o.n && std::equal(at.begin(), at.begin() + n, o.at.begin());
  }
  // -1 when dimension d is whole, else its blocking factor (0: variable).
  int64_t SplitBlock(int d) const {
    for (int i = 0; i < n; ++i) {
      if (at[static_cast<size_t>(i)].kind == AtomKind::kIn && at[static_cast<size_t>(i)].dim == d) {
        return at[static_cast<size_t>(i)].block;
      }
    }
    return -1;
  }
};

// The shape of a concrete layout (fixed blocking factors only).
Shape ShapeOf(const Layout& l);

// `a` with every whole dimension that `b` splits read as the same split.
Shape Refine(const Shape& a, const Shape& b);

// Equal after refinement against each other.
bool Equivalent(const Shape& a, const Shape& b);

// The refined pair: PREFIX is the product of ra[0, pf), SUFFIX̄ of ra[0, sb).
struct PairShape {
  Shape ra;
  int pf = 0;
  int sb = 0;
};

PairShape AnalyzePair(const Shape& a, const Shape& b);

// Size of one concrete atom (no variables).
uint64_t AtomBytes(const Atom& x, const Box& bounds, uint64_t field_bytes);

// The product of the sizes of s[from, to), saturating; concrete atoms only.
uint64_t Product(const Shape& s, int from, int to, const Box& bounds, uint64_t field_bytes);

// PREFIX of a hop in bytes: the product of the common prefix's atoms
// times, when the prefix leaves F out, `element_bytes` (the smallest
// field): without F, an atom counts points, and a contiguous run is one
// field's value at each of them (AOS <F,x> -> SOA <x,F> shares nothing and
// moves runs of one field, not of one byte).
uint64_t PrefixBytes(const PairShape& p, const Box& bounds, uint64_t field_bytes,
                     uint64_t element_bytes);

// True when s[from, to) holds the field atom F.
bool HasFields(const Shape& s, int from, int to);

// See CandidateLayouts in full_planner.h. Element 0 is the source; element 1
// the destination unless the two are equivalent.
std::vector<Shape> CandidateShapes(const Shape& src, const Shape& dst, int dims);

// The blocking factor 2^v, clamped to [1, extent].
inline int64_t BlockFor(int v, int64_t extent) {
  const int64_t e = std::max<int64_t>(extent, 1);
  return v >= 62 ? e : std::min<int64_t>(int64_t{1} << v, e);
}

// A shape with its variables replaced by blocks[d].
Result<Layout> Concretize(const Shape& s, const std::array<int64_t, kMaxDims>& blocks, int dims);

}  // namespace isometry::full_planner_internal
