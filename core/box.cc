#include "core/box.h"


namespace isometry {

Box Box::FromExtents(std::initializer_list<int64_t> extents) {
  Box b;
  b.dims = static_cast<int>(extents.size());
  int d = 0;
  for (int64_t e : extents) {
    if (d >= kMaxDims) break;
    b.lo[d] = 0;
    b.hi[d] = e;
    ++d;
  }
  return b;
}

uint64_t Box::volume() const {
  uint64_t v = 1;
  for (int d = 0; d < dims; ++d) {
    if (hi[d] <= lo[d]) return 0;
    v *= static_cast<uint64_t>(hi[d] - lo[d]);
  }
  return v;
}

bool Box::empty() const { return volume() == 0; }

bool Box::contains(const Box& other) const {
  if (other.dims != dims) return false;
  for (int d = 0; d < dims; ++d) {
    if (other.lo[d] < lo[d] || other.hi[d] > hi[d]) return false;
  }
  return true;
}

Status Box::Validate(std::string_view what) const {
  if (dims < 1 || dims > kMaxDims) {
    return InvalidArgument(what, ": ", dims, " dimensions; between 1 and ", kMaxDims,
                           " are supported");
  }
  unsigned __int128 v = 1;
  for (int d = 0; d < dims; ++d) {
    if (hi[d] < lo[d]) {
      return InvalidArgument(what, ": dimension ", d, " has hi ", hi[d], " below lo ", lo[d]);
    }
    // In 128 bits: hi - lo of two int64 values can exceed int64.
    v *= static_cast<unsigned __int128>(static_cast<__int128>(hi[d]) - lo[d]);
    if (v > (uint64_t{1} << 62)) {
      return OutOfRange(what, ": ", ToString(*this), " has more than 2^62 points");
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
