// Instances: an index space x a field space, linearized by a layout.
//
// InstanceShape says where every (field, point) lives relative to the
// instance's first byte; it knows nothing about which memory holds it.
#pragma once

#include <array>
#include <cstdint>
#include <optional>

#include "core/box.h"
#include "core/field_space.h"
#include "core/layout.h"
#include "core/status.h"

namespace isometry {

// How one dimension contributes to a field's byte offset:
//   whole:   (x - lo) * stride_in
//   blocked: ((x - lo) / block) * stride_out + ((x - lo) % block) * stride_in
struct DimAddressing {
  int64_t block = 0;  // 0 when the dimension is whole
  uint64_t stride_in = 0;
  uint64_t stride_out = 0;
};

// A field's offset is separable: base + sum over dimensions.
struct FieldAddressing {
  uint64_t base = 0;
  uint32_t element_bytes = 0;
  std::array<DimAddressing, kMaxDims> dims{};
};

struct InstanceShape {
  Box bounds;
  FieldSpace fields;
  Layout layout;

  // Checks the box, that the layout has the box's dimensionality, and that
  // the storage size fits in 2^62 bytes with every empty component counted
  // as 1 (so every stride and offset Addressing computes fits too). All
  // errors are INVALID_ARGUMENT.
  Status Validate(std::string_view what) const;
  // Storage bytes, padding of partial blocks included (TOTAL of §4.2).
  uint64_t total_bytes() const;
  FieldAddressing Addressing(size_t field) const;
  // Byte offset of one (field, point); the point must lie in `bounds`.
  uint64_t OffsetOf(size_t field, const std::array<int64_t, kMaxDims>& point) const;
};

// A copy's source, destination and box (absent: the source's index space)
// have one number of dimensions. The error (INVALID_ARGUMENT) gives the
// counts, so a mismatch is not reported as a box outside an index space.
Status CheckCopyDimensions(const Box& src, const Box& dst, const std::optional<Box>& box);

}  // namespace isometry
