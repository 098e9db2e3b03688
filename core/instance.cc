#include "core/instance.h"

#include <algorithm>

namespace isometry {

using Kind = LayoutComponent::Kind;

Status InstanceShape::Validate(std::string_view what) const {
  ISO_RETURN_IF_ERROR(bounds.Validate(what));
  if (layout.dims() != bounds.dims) {
    return InvalidArgument(what, ": layout '", layout.ToString(), "' has ", layout.dims(),
                           " dimension(s) but the index space ", ToString(bounds), " has ",
                           bounds.dims);
  }
  // Each component counts at least 1, like Box's span: an empty instance
  // still computes strides (Addressing) from the other components, and
  // those must not wrap. Field sizes are at most 2^20 and component sizes
  // at most 2^62, so the running product stays far below 2^128.
  unsigned __int128 total = std::max<uint64_t>(fields.total_bytes(), 1);
  for (size_t i = 0; i < layout.components().size(); ++i) {
    if (layout.components()[i].kind == Kind::kFields) {
      continue;
    }
    total *= std::max<uint64_t>(ComponentSize(layout, i, bounds, fields.total_bytes()), 1);
    if (total > (uint64_t{1} << 62)) {
      return InvalidArgument(what, ": storage of ", ToString(bounds), " in layout '",
                             layout.ToString(), "' exceeds 2^62 bytes (an empty dimension ",
                             "counted as 1 point)");
    }
  }
  return OkStatus();
}

Status CheckCopyDimensions(const Box& src, const Box& dst, const std::optional<Box>& box) {
  if (src.dims != dst.dims) {
    return InvalidArgument("copy: the source instance has ", src.dims, " dimension(s) (",
                           ToString(src), "), the destination ", dst.dims, " (", ToString(dst),
                           "); both need the same number");
  }
  if (box && box->dims != src.dims) {
    return InvalidArgument("copy: the box ", ToString(*box), " has ", box->dims,
                           " dimension(s) but the instances have ", src.dims);
  }
  return OkStatus();
}

uint64_t InstanceShape::total_bytes() const { return Total(layout, bounds, fields.total_bytes()); }

FieldAddressing InstanceShape::Addressing(size_t field) const {
  FieldAddressing a;
  a.element_bytes = fields.fields()[field].size;
  const auto& comps = layout.components();
  const size_t fpos = layout.fields_position();
  // Points per field block: product of the components inside F.
  uint64_t inner_points = 1;
  for (size_t i = 0; i < fpos; ++i) {
    inner_points *= ComponentSize(layout, i, bounds, 0);
  }
  a.base = inner_points * fields.offset_of(field);
  // Components inside F step in units of this field's size; outside F in
  // units of the whole block of all fields.
  uint64_t stride = a.element_bytes;
  for (size_t i = 0; i < comps.size(); ++i) {
    const LayoutComponent& c = comps[i];
    if (c.kind == Kind::kFields) {
      stride = inner_points * fields.total_bytes();
      continue;
    }
    DimAddressing& d = a.dims[c.dim];
    if (c.kind == Kind::kDimIn) {
      d.block = c.block;
      d.stride_in = stride;
    } else if (c.kind == Kind::kDimOut) {
      d.stride_out = stride;
    } else {
      d.stride_in = stride;
    }
    stride *= ComponentSize(layout, i, bounds, fields.total_bytes());
  }
  return a;
}

uint64_t InstanceShape::OffsetOf(size_t field, const std::array<int64_t, kMaxDims>& point) const {
  const FieldAddressing a = Addressing(field);
  uint64_t off = a.base;
  for (int d = 0; d < bounds.dims; ++d) {
    const uint64_t r = static_cast<uint64_t>(point[d] - bounds.lo[d]);
    const DimAddressing& m = a.dims[d];
    off += m.block ? (r / m.block) * m.stride_out + (r % m.block) * m.stride_in : r * m.stride_in;
  }
  return off;
}

}  // namespace isometry
