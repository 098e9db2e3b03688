// Index spaces: N-dimensional half-open boxes [lo, hi) with 64-bit bounds.
#pragma once

#include <array>
#include <cstdint>
#include <string>

#include "core/status.h"

namespace isometry {

inline constexpr int kMaxDims = 4;
// Bounds lie in [-kMaxCoordinate, kMaxCoordinate]: the difference of two
// bounds, and a bound plus an extent, then stay inside int64.
inline constexpr int64_t kMaxCoordinate = (int64_t{1} << 62) - 1;
// Largest span (product of extents, empty dimensions counted as 1).
inline constexpr uint64_t kMaxSpan = uint64_t{1} << 62;

struct Box {
  int dims = 0;
  std::array<int64_t, kMaxDims> lo{};
  std::array<int64_t, kMaxDims> hi{};

  // A box [0, extent) in each dimension.
  static Box FromExtents(std::initializer_list<int64_t> extents);

  // hi - lo. Meaningful for a validated box (Validate bounds it by 2^62);
  // computed modulo 2^64 so that an unvalidated box from a request can
  // never reach signed overflow, only a wrong number.
  int64_t extent(int d) const {
    return static_cast<int64_t>(static_cast<uint64_t>(hi[d]) - static_cast<uint64_t>(lo[d]));
  }
  // Number of points; 0 for an empty box. Callers validate first, so the
  // product cannot overflow (Validate checks it).
  uint64_t volume() const;
  bool empty() const;
  bool contains(const Box& other) const;
  bool operator==(const Box&) const = default;

  // Checks 1 <= dims <= kMaxDims, lo <= hi, every bound within
  // +-kMaxCoordinate, and that the product of the extents, each empty
  // dimension counted as 1, fits in 2^62 (the "span"). Every error is
  // INVALID_ARGUMENT.
  //
  // Why the span and not the volume: a box [0,0) x [0,2^62) x [0,2^62) holds
  // no point, but chunking and addressing multiply the other dimensions'
  // extents (a row of a chunk, a stride); bounding the span keeps every such
  // partial product, and any sum or difference of two bounds, inside int64.
  Status Validate(std::string_view what) const;
};

std::string ToString(const Box& box);

}  // namespace isometry
