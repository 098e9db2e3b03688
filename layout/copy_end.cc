#include "layout/copy_end.h"

#include <algorithm>

namespace isometry {
namespace {

// The byte past the highest run of `p` (offsets relative to `base`), in
// 128 bits: a hostile form cannot wrap it. (The lowest is FormPiece::lowest.)
__int128 PieceEnd(const FormPiece& p, __int128 base) {
  __int128 hi = base + p.offset;
  for (const FormLoop& l : p.loops) {
    if (l.stride > 0) hi += static_cast<__int128>(l.count - 1) * l.stride;
  }
  if (p.body.empty()) return hi + p.run;
  __int128 end = hi;
  for (const FormPiece& b : p.body) end = std::max(end, PieceEnd(b, hi));
  return end;
}

}  // namespace

CanonicalForm DenseForm(uint64_t bytes) {
  return CanonicalForm{{FormPiece{0, static_cast<int64_t>(bytes), {}, {}}}};
}

CanonicalForm ShiftForm(CanonicalForm form, int64_t delta) {
  for (FormPiece& p : form.pieces) p.offset += delta;
  return form;
}

Result<std::shared_ptr<const EndForm>> MakeFormEnd(CanonicalForm form, uint64_t span,
                                                   std::string what) {
  auto end = std::make_shared<EndForm>();
  end->bytes = form.bytes();
  if (end->bytes == 0) return InvalidArgument(what, " packs to 0 bytes: nothing to copy");
  if (end->bytes == UINT64_MAX) return InvalidArgument(what, " packs to more than 2^64 bytes");
  bool inside = form.lowest() >= 0;
  for (const FormPiece& p : form.pieces) inside &= PieceEnd(p, 0) <= static_cast<__int128>(span);
  if (!inside) {
    return Internal(what, ": a run of its form lies outside its ", span, " bytes of storage");
  }
  end->runs = form.runs();
  end->span = span;
  end->form = std::move(form);
  end->what = std::move(what);
  return std::shared_ptr<const EndForm>(std::move(end));
}

Result<std::shared_ptr<const EndForm>> MakeLayoutChunksEnd(LayoutBox l, std::string what) {
  auto end = std::make_shared<EndForm>();
  end->bytes = l.bytes();
  if (end->bytes == 0) return InvalidArgument(what, " packs to 0 bytes: nothing to copy");
  end->runs = l.box.volume() * l.shape.fields.size();
  end->span = l.shape.total_bytes();
  end->layout = std::move(l);
  end->what = std::move(what);
  return std::shared_ptr<const EndForm>(std::move(end));
}

Result<std::shared_ptr<const EndForm>> FarEndForm(const EndForm* here) {
  if (!here) return std::shared_ptr<const EndForm>();
  if (here->bytes > static_cast<uint64_t>(INT64_MAX)) {
    return InvalidArgument("a stream of ", here->bytes, " bytes");
  }
  return MakeFormEnd(DenseForm(here->bytes), here->bytes, "the other node's end");
}

std::optional<Box> CopyBox(const EndForm* form, std::optional<Box> box) {
  if (form) return std::nullopt;
  return box;
}

InstanceShape StreamShape(uint64_t bytes) {
  InstanceShape s;
  s.bounds.dims = 1;
  s.bounds.lo[0] = 0;
  s.bounds.hi[0] = static_cast<int64_t>(bytes);
  s.fields = *FieldSpace::Make({Field{"packed", 1}});
  s.layout = *Layout::Parse("F,x", 1);
  return s;
}

Status MatchForms(const EndForm* src, const EndForm* dst, bool has_box) {
  if (!src && !dst) return OkStatus();
  if (!src || !dst) {
    return InvalidArgument("copy: one end is packed (a datatype) and the other is not; ",
                           "describe the other end by its form too");
  }
  if (src->bytes != dst->bytes) {
    return InvalidArgument("copy: the source (", src->what, ") packs to ", src->bytes,
                           " bytes, the destination (", dst->what, ") to ", dst->bytes);
  }
  if (has_box) return InvalidArgument("copy: a datatype copy moves whole packed streams; no box");
  return OkStatus();
}

bool PairsEveryRun(const EndForm* src, const EndForm* dst) {
  return (src && src->layout) || (dst && dst->layout);
}

uint64_t StorageBytes(const InstanceShape& shape, const EndForm* form) {
  return form ? form->span : shape.total_bytes();
}

bool CoversStorage(const InstanceShape& shape, const EndForm* form, const Box& box) {
  // A form end covers its storage when its one run fills it.
  if (form) return form->runs == 1 && form->bytes == form->span;
  return box == shape.bounds &&
         shape.bounds.volume() * shape.fields.total_bytes() == shape.total_bytes();
}

std::string DescribeEnd(const EndForm* form, std::string fallback) {
  if (form) return form->what;
  return fallback;
}

}  // namespace isometry
