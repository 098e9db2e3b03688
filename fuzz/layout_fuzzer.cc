// Layout strings with a random number of dimensions: Layout::Parse must
// reject or accept with a round-trip-stable text, and an accepted layout
// over a random index space must validate, size and address consistently.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string_view>

#include "core/instance.h"

using namespace isometry;

namespace {

// Bounds near the interesting edges: small, raw, +-(2^62 - 1) (the largest
// accepted), 2^31, and int64's own limits.
int64_t Coordinate(uint8_t sel, int64_t raw) {
  switch (sel % 6) {
    case 0:
      return raw % 17;
    case 1:
      return raw;
    case 2:
      return kMaxCoordinate - (raw & 63);
    case 3:
      return -kMaxCoordinate + (raw & 63);
    case 4:
      return (int64_t{1} << 31) + (raw & 3);
    default:
      return raw < 0 ? std::numeric_limits<int64_t>::min() : std::numeric_limits<int64_t>::max();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Header: dims byte, then per dimension a selector byte and 2 x 8 bytes.
  constexpr size_t kHeader = 1 + kMaxDims * 17;
  if (size < kHeader) {
    return 0;
  }
  const int dims = data[0] % 6;  // 0 and 5 are invalid on purpose
  Box box;
  box.dims = dims;
  for (int d = 0; d < kMaxDims && d < dims; ++d) {
    const uint8_t* p = data + 1 + static_cast<size_t>(d) * 17;
    int64_t a, b;
    std::memcpy(&a, p + 1, 8);
    std::memcpy(&b, p + 9, 8);
    box.lo[d] = Coordinate(p[0], a);
    box.hi[d] = Coordinate(p[0] >> 4, b);
  }
  const std::string_view text(reinterpret_cast<const char*>(data + kHeader), size - kHeader);
  const Result<Layout> l = Layout::Parse(text, dims);
  if (!l.ok()) {
    if (l.status().code() != absl::StatusCode::kInvalidArgument) {
      std::abort();
    }
    return 0;
  }
  const Result<Layout> again = Layout::Parse(l->ToString(), dims);
  if (!again.ok() || !(*again == *l)) {
    std::abort();
  }
  const InstanceShape shape{box, FieldSpace::Uniform(2, 3), *l};
  if (!shape.Validate("fuzz").ok()) {
    // Sizes of an unvalidated shape may be wrong but must not be UB.
    (void)Total(*l, box, 6);
    return 0;
  }
  const uint64_t total = shape.total_bytes();
  if (total > (uint64_t{1} << 62)) {
    std::abort();
  }
  if (!box.empty()) {
    std::array<int64_t, kMaxDims> last{};
    for (int d = 0; d < dims; ++d) {
      last[d] = box.hi[d] - 1;
    }
    if (shape.OffsetOf(1, last) + 3 > total) {
      std::abort();
    }
  }
  return 0;
}
