#include "layout/layout_chunk.h"

#include <algorithm>
#include <array>
#include <vector>

#include "layout/compiler.h"

namespace isometry {

namespace {

using Point = std::array<int64_t, kMaxDims>;

// The point of `b` at row-major index `i`.
Point PointAt(const Box& b, uint64_t i) {
  Point x = b.lo;
  for (int d = b.dims - 1; d >= 0; --d) {
    const auto e = static_cast<uint64_t>(b.extent(d));
    x[d] = b.lo[d] + static_cast<int64_t>(i % e);
    i /= e;
  }
  return x;
}

void NextPoint(const Box& b, Point& x) {
  for (int d = b.dims - 1; d >= 0; --d) {
    if (++x[d] < b.hi[d]) {
      return;
    }
    x[d] = b.lo[d];
  }
}

Status CheckRange(const LayoutBox& l, uint64_t begin, uint64_t end) {
  if (begin > end || end > l.bytes()) {
    return OutOfRange("packed range [", begin, ", ", end, ") of a ", l.bytes(),
                      "-byte layout stream");
  }
  return OkStatus();
}

// A field's bytes at one point that lie in the range: `from` bytes into the
// field, at packed position `pos`, `n` of them.
struct FieldRun {
  size_t field = 0;
  const Point* point = nullptr;
  uint64_t from = 0;
  uint64_t pos = 0;
  uint64_t n = 0;
};

// Calls fn(FieldRun) for every field run in [begin, end) in pack order,
// visiting only the points the range touches; stops when fn returns false
// (and returns false).
template <typename Fn>
bool ForEachFieldRun(const LayoutBox& l, uint64_t begin, uint64_t end, Fn fn) {
  const uint64_t point = l.shape.fields.total_bytes();
  const auto& fields = l.shape.fields.fields();
  uint64_t i = begin / point;
  Point x = PointAt(l.box, i);
  for (uint64_t at = i * point; at < end; NextPoint(l.box, x)) {
    for (size_t f = 0; f < fields.size() && at < end; ++f) {
      const uint64_t size = fields[f].size;
      const uint64_t lo = std::max(at, begin), hi = std::min(at + size, end);
      if (lo < hi && !fn(FieldRun{f, &x, lo - at, lo, hi - lo})) {
        return false;
      }
      at += size;
    }
  }
  return true;
}

// Boxes covering the row-major indices [first, last) of `b`, in order,
// each contiguous in that order (so the AOS row-major layout over it is
// its bytes of the stream). Dimensions before `d` have extent 1.
void RangeBoxes(const Box& b, int d, uint64_t first, uint64_t last, std::vector<Box>& out) {
  if (first >= last) {
    return;
  }
  uint64_t inner = 1;
  for (int k = d + 1; k < b.dims; ++k) {
    inner *= static_cast<uint64_t>(b.extent(k));
  }
  auto rows = [&](uint64_t r0, uint64_t r1) {
    Box q = b;
    q.lo[d] = b.lo[d] + static_cast<int64_t>(r0);
    q.hi[d] = b.lo[d] + static_cast<int64_t>(r1);
    return q;
  };
  const uint64_t r0 = first / inner, r_last = (last - 1) / inner;
  if (first % inner == 0 && last % inner == 0) {
    out.push_back(rows(r0, last / inner));
    return;
  }
  if (r0 == r_last) {
    RangeBoxes(rows(r0, r0 + 1), d + 1, first - r0 * inner, last - r0 * inner, out);
    return;
  }
  uint64_t full = r0;
  if (first % inner != 0) {
    RangeBoxes(rows(r0, r0 + 1), d + 1, first % inner, inner, out);
    ++full;
  }
  if (last / inner > full) {
    out.push_back(rows(full, last / inner));
  }
  if (last % inner != 0) {
    RangeBoxes(rows(r_last, r_last + 1), d + 1, 0, last % inner, out);
  }
}

// The runs of [begin, end) one op each (a point cut by the range).
void SingleRuns(const LayoutBox& l, uint64_t begin, uint64_t lo, uint64_t hi, bool to_layout,
                std::vector<CopyOp>& ops) {
  ForEachFieldRun(l, lo, hi, [&](const FieldRun& r) {
    CopyOp op;
    const uint64_t slot = r.pos - begin;
    const uint64_t inst = l.shape.OffsetOf(r.field, *r.point) + r.from;
    op.src_offset = to_layout ? slot : inst;
    op.dst_offset = to_layout ? inst : slot;
    op.run_bytes = r.n;
    ops.push_back(op);
    return true;
  });
}

}  // namespace

uint64_t LayoutBox::bytes() const { return box.volume() * shape.fields.total_bytes(); }

Result<CanonicalForm> LayoutRangeForm(const LayoutBox& l, uint64_t begin, uint64_t end) {
  ISO_RETURN_IF_ERROR(CheckRange(l, begin, end));
  CanonicalForm form;
  std::vector<FormPiece>& runs = form.pieces;
  const bool whole = ForEachFieldRun(l, begin, end, [&](const FieldRun& r) {
    const auto offset = static_cast<int64_t>(l.shape.OffsetOf(r.field, *r.point) + r.from);
    if (!runs.empty() && runs.back().offset + runs.back().run == offset) {
      runs.back().run += static_cast<int64_t>(r.n);
      return true;
    }
    if (static_cast<int64_t>(runs.size()) >= kMaxFormWalkSegments) {
      return false;
    }
    runs.push_back(FormPiece{offset, static_cast<int64_t>(r.n), {}, {}});
    return true;
  });
  if (!whole) {
    return ResourceExhausted(
        "a chunk of the layout (its fields are addressed differently, e.g. SOA over fields of "
        "different sizes, so its AOS C-order stream is a list of runs) has more than ",
        kMaxFormWalkSegments, " runs to pair with the datatype's in bytes [", begin, ", ", end,
        ") of the stream");
  }
  return form;
}

Result<CopyProgram> LayoutSlotProgram(const LayoutBox& l, uint64_t begin, uint64_t end,
                                      bool to_layout) {
  ISO_RETURN_IF_ERROR(CheckRange(l, begin, end));
  const uint64_t point = l.shape.fields.total_bytes();
  const uint64_t first = (begin + point - 1) / point, last = end / point;  // whole points
  CopyProgram p;
  if (first >= last) {
    SingleRuns(l, begin, begin, end, to_layout, p.ops);
    TallyProgram(p);
    return p;
  }
  SingleRuns(l, begin, begin, first * point, to_layout, p.ops);
  std::vector<Box> boxes;
  RangeBoxes(l.box, 0, first, last, boxes);
  uint64_t index = first;
  for (const Box& q : boxes) {
    const InstanceShape dense{q, l.shape.fields, Layout::RowMajor(q.dims)};
    ISO_ASSIGN_OR_RETURN(CopyProgram part, to_layout ? CompileCopy(dense, l.shape, q)
                                                     : CompileCopy(l.shape, dense, q));
    const uint64_t slot = index * point - begin;
    for (CopyOp& op : part.ops) {
      (to_layout ? op.src_offset : op.dst_offset) += slot;
      p.ops.push_back(op);
    }
    index += q.volume();
  }
  SingleRuns(l, begin, last * point, end, to_layout, p.ops);
  TallyProgram(p);
  return p;
}

}  // namespace isometry
