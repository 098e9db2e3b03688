#include "core/box.h"

#include <algorithm>

namespace isometry {

Box Box::FromExtents(std::initializer_list<int64_t> extents) {
  Box b;
  b.dims = static_cast<int>(extents.size());
  int d = 0;
  for (int64_t e : extents) {
    if (d >= kMaxDims) {
      break;
    }
    b.lo[d] = 0;
    b.hi[d] = e;
    ++d;
  }
  return b;
}

uint64_t Box::volume() const {
  uint64_t v = 1;
  for (int d = 0; d < dims; ++d) {
    if (hi[d] <= lo[d]) {
      return 0;
    }
    v *= static_cast<uint64_t>(extent(d));
  }
  return v;
}

bool Box::empty() const { return volume() == 0; }

bool Box::contains(const Box& other) const {
  if (other.dims != dims) {
    return false;
  }
  for (int d = 0; d < dims; ++d) {
    if (other.lo[d] < lo[d] || other.hi[d] > hi[d]) {
      return false;
    }
  }
  return true;
}

Status Box::Validate(std::string_view what) const {
  if (dims < 1 || dims > kMaxDims) {
    return InvalidArgument(what, ": ", dims, " dimensions; between 1 and ", kMaxDims,
                           " are supported");
  }
  unsigned __int128 span = 1;
  for (int d = 0; d < dims; ++d) {
    for (const int64_t v : {lo[d], hi[d]}) {
      if (v < -kMaxCoordinate || v > kMaxCoordinate) {
        return InvalidArgument(what, ": dimension ", d, " bound ", v, " lies outside [-",
                               kMaxCoordinate, ", ", kMaxCoordinate, "] (+-(2^62-1))");
      }
    }
    if (hi[d] < lo[d]) {
      return InvalidArgument(what, ": dimension ", d, " has hi ", hi[d], " below lo ", lo[d]);
    }
    // Within the coordinate bounds hi - lo fits in int64; the span stays
    // below 2^124 before the check, so 128 bits hold it.
    span *= static_cast<unsigned __int128>(std::max<int64_t>(hi[d] - lo[d], 1));
    if (span > kMaxSpan) {
      return InvalidArgument(what, ": ", ToString(*this),
                             " spans more than 2^62 points (the product of its extents, an "
                             "empty dimension counted as 1)");
    }
  }
  return OkStatus();
}

std::string ToString(const Box& box) {
  std::string s = "[";
  for (int d = 0; d < box.dims; ++d) {
    StrAppend(&s, d ? ", " : "", box.lo[d], "..", box.hi[d]);
  }
  return s + ")";
}

}  // namespace isometry
