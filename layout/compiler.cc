#include "layout/compiler.h"

#include <algorithm>
#include <numeric>

namespace isometry {

namespace {

// Tile length for strided inner loops: keeps the lines one tile touches on
// the strided side in L1/L2 while the outer loops revisit them.
constexpr uint64_t kTile = 512;
constexpr uint64_t kCacheLine = 64;

// One dimension's contribution to an op: a two-level loop (outer blocks of
// `inner.count` consecutive points) starting at the given offsets.
struct DimPiece {
  uint64_t src_start = 0;
  uint64_t dst_start = 0;
  CopyLoop outer;
  CopyLoop inner;
};

// Offset of point x of one dimension on one side.
uint64_t DimOffset(const DimAddressing& m, int64_t lo, int64_t x) {
  const uint64_t r = static_cast<uint64_t>(x - lo);
  return m.block ? (r / m.block) * m.stride_out + (r % m.block) * m.stride_in : r * m.stride_in;
}

// Next point after x where side `m` (origin lo) starts a new block; hi if none.
int64_t NextBreak(const DimAddressing& m, int64_t lo, int64_t x, int64_t hi) {
  if (!m.block) {
    return hi;
  }
  // Relative to lo: r + block <= 2^63 - 1 for a validated shape (r below
  // the extent, both at most 2^62), while lo + that could pass int64.
  const int64_t r = x - lo;
  const int64_t next = r - r % m.block + m.block;
  return next >= hi - lo ? hi : lo + next;
}

// Splits [a, b) of one dimension into pieces where both sides are affine,
// grouping equal-length segments whose offsets advance by constant deltas
// into one two-level piece. When block boundaries of both sides coincide
// (one side whole, or equal blocks in phase) this is at most three pieces:
// head, full blocks, tail.
std::vector<DimPiece> SplitDim(const DimAddressing& s, int64_t slo, const DimAddressing& d,
                               int64_t dlo, int64_t a, int64_t b) {
  std::vector<DimPiece> pieces;
  auto segment = [&](int64_t x, int64_t len) {
    DimPiece p;
    p.src_start = DimOffset(s, slo, x);
    p.dst_start = DimOffset(d, dlo, x);
    p.inner = {static_cast<uint64_t>(len), s.stride_in, d.stride_in};
    return p;
  };
  // Appends a segment, extending the last piece when it continues its pattern.
  auto add = [&](int64_t x, int64_t len) {
    DimPiece p = segment(x, len);
    if (!pieces.empty()) {
      DimPiece& last = pieces.back();
      if (last.inner == p.inner) {
        const uint64_t k = last.outer.count;
        const uint64_t ds = p.src_start - last.src_start;
        const uint64_t dd = p.dst_start - last.dst_start;
        // Offsets only grow along a dimension, so the unsigned deltas are exact.
        if (k == 1 || (ds == k * last.outer.src_stride && dd == k * last.outer.dst_stride)) {
          if (k == 1) {
            last.outer = {1, ds, dd};
          }
          last.outer.count = k + 1;
          return;
        }
      }
    }
    pieces.push_back(p);
  };

  const bool one_period =
      !s.block || !d.block || (s.block == d.block && (slo - dlo) % s.block == 0);
  if (one_period) {
    const DimAddressing& m = s.block ? s : d;
    const int64_t mlo = s.block ? slo : dlo;
    if (!m.block) {
      add(a, b - a);
      return pieces;
    }
    int64_t x = a;
    const int64_t head_end = NextBreak(m, mlo, x, b);
    if ((x - mlo) % m.block != 0) {  // partial first block
      add(x, head_end - x);
      x = head_end;
    }
    const int64_t full = (b - x) / m.block;
    if (full > 0) {
      DimPiece p = segment(x, m.block);
      if (full > 1) {
        const DimPiece next = segment(x + m.block, m.block);
        p.outer = {static_cast<uint64_t>(full), next.src_start - p.src_start,
                   next.dst_start - p.dst_start};
      }
      pieces.push_back(p);
      x += full * m.block;
    }
    if (x < b) {
      add(x, b - x);
    }
    return pieces;
  }
  // Different blocking on the two sides: walk every segment boundary.
  for (int64_t x = a; x < b;) {
    const int64_t end = std::min(NextBreak(s, slo, x, b), NextBreak(d, dlo, x, b));
    add(x, end - x);
    x = end;
  }
  return pieces;
}

// Drops unit loops, orders loops by destination stride (writes stream),
// folds contiguous inner loops into the run, and merges adjacent loops that
// step as one.
void Canonicalize(CopyOp& op) {
  std::vector<CopyLoop> loops;
  for (int i = 0; i < op.num_loops; ++i) {
    if (op.loops[i].count > 1) {
      loops.push_back(op.loops[i]);
    }
  }
  std::stable_sort(loops.begin(), loops.end(), [](const CopyLoop& x, const CopyLoop& y) {
    if (x.dst_stride != y.dst_stride) {
      return x.dst_stride > y.dst_stride;
    }
    return x.src_stride > y.src_stride;
  });
  FoldLoops(std::move(loops), op);
}

bool SameLoops(const CopyOp& a, const CopyOp& b) {
  if (a.num_loops != b.num_loops) {
    return false;
  }
  for (int i = 0; i < a.num_loops; ++i) {
    if (!(a.loops[i] == b.loops[i])) {
      return false;
    }
  }
  return true;
}

using OpList = std::vector<CopyOp>;

// Fields stored next to each other on both sides (F innermost in both, AOS
// to AOS) fuse into one wider run.
bool TryFuseAdjacent(OpList& group, const OpList& next) {
  if (group.size() != next.size()) {
    return false;
  }
  for (size_t j = 0; j < group.size(); ++j) {
    const CopyOp& g = group[j];
    const CopyOp& n = next[j];
    if (!SameLoops(g, n) || n.src_offset != g.src_offset + g.run_bytes ||
        n.dst_offset != g.dst_offset + g.run_bytes) {
      return false;
    }
  }
  for (size_t j = 0; j < group.size(); ++j) {
    group[j].run_bytes += next[j].run_bytes;
    Canonicalize(group[j]);
  }
  return true;
}

// Groups of fields with identical shape at constant spacing become one op
// with a field loop (SOA: field k is k * |x| * size further on).
std::vector<OpList> LoopOverFields(std::vector<OpList> groups) {
  std::vector<OpList> out;
  size_t i = 0;
  while (i < groups.size()) {
    size_t j = i + 1;
    const OpList& first = groups[i];
    bool deltas_set = false;
    std::vector<uint64_t> ds(first.size()), dd(first.size());
    while (j < groups.size() && groups[j].size() == first.size()) {
      const OpList& g = groups[j];
      const OpList& prev = groups[j - 1];
      bool ok = true;
      for (size_t k = 0; k < first.size() && ok; ++k) {
        ok = SameLoops(g[k], first[k]) && g[k].run_bytes == first[k].run_bytes &&
             first[k].num_loops < kMaxCopyLoops && g[k].src_offset > prev[k].src_offset &&
             g[k].dst_offset > prev[k].dst_offset;
        if (!ok) {
          break;
        }
        const uint64_t s = g[k].src_offset - prev[k].src_offset;
        const uint64_t d = g[k].dst_offset - prev[k].dst_offset;
        if (deltas_set) {
          ok = s == ds[k] && d == dd[k];
        } else {
          ds[k] = s;
          dd[k] = d;
        }
      }
      if (!ok) {
        break;
      }
      deltas_set = true;
      ++j;
    }
    OpList merged = first;
    if (j - i > 1) {
      for (size_t k = 0; k < merged.size(); ++k) {
        CopyOp& op = merged[k];
        std::move_backward(op.loops.begin(), op.loops.begin() + op.num_loops,
                           op.loops.begin() + op.num_loops + 1);
        op.loops[0] = {static_cast<uint64_t>(j - i), ds[k], dd[k]};
        ++op.num_loops;
        Canonicalize(op);
      }
    }
    out.push_back(std::move(merged));
    i = j;
  }
  return out;
}

// Splits a long strided inner loop into tiles placed outermost when an outer
// loop revisits nearby memory (AOS->SOA, transposes), so each tile of the
// strided side is read from memory once.
void Tile(const CopyOp& op, OpList& out) {
  const int n = op.num_loops;
  if (n < 2 || n >= kMaxCopyLoops || op.loops[n - 1].count < 2 * kTile) {
    out.push_back(op);
    return;
  }
  bool revisits = false;
  for (int i = 0; i < n - 1; ++i) {
    revisits |= op.loops[i].src_stride < kCacheLine || op.loops[i].dst_stride < kCacheLine;
  }
  if (!revisits) {
    out.push_back(op);
    return;
  }
  const CopyLoop inner = op.loops[n - 1];
  const uint64_t tiles = inner.count / kTile;
  CopyOp tiled = op;
  std::move_backward(tiled.loops.begin(), tiled.loops.begin() + n, tiled.loops.begin() + n + 1);
  tiled.loops[0] = {tiles, kTile * inner.src_stride, kTile * inner.dst_stride};
  tiled.loops[n] = {kTile, inner.src_stride, inner.dst_stride};
  tiled.num_loops = n + 1;
  out.push_back(tiled);
  const uint64_t rest = inner.count % kTile;
  if (rest) {
    CopyOp tail = op;
    tail.loops[n - 1].count = rest;
    tail.src_offset += tiles * kTile * inner.src_stride;
    tail.dst_offset += tiles * kTile * inner.dst_stride;
    out.push_back(tail);
  }
}

Status CheckCompatible(const InstanceShape& src, const InstanceShape& dst, const Box& box) {
  ISO_RETURN_IF_ERROR(src.Validate("source instance"));
  ISO_RETURN_IF_ERROR(dst.Validate("destination instance"));
  ISO_RETURN_IF_ERROR(box.Validate("copy box"));
  if (!(src.fields == dst.fields)) {
    return InvalidArgument("copy: source and destination field spaces differ (", src.fields.size(),
                           " vs ", dst.fields.size(),
                           " fields); fields must match by name, order and size");
  }
  ISO_RETURN_IF_ERROR(CheckCopyDimensions(src.bounds, dst.bounds, box));
  if (!src.bounds.contains(box)) {
    return OutOfRange("copy: box ", ToString(box), " lies outside the source index space ",
                      ToString(src.bounds));
  }
  if (!dst.bounds.contains(box)) {
    return OutOfRange("copy: box ", ToString(box), " lies outside the destination index space ",
                      ToString(dst.bounds));
  }
  return OkStatus();
}

}  // namespace

Result<CopyProgram> CompileCopy(const InstanceShape& src, const InstanceShape& dst,
                                const Box& box) {
  ISO_RETURN_IF_ERROR(CheckCompatible(src, dst, box));
  CopyProgram program;
  if (box.empty()) {
    return program;
  }
  const int dims = box.dims;

  std::vector<OpList> per_field;
  for (size_t f = 0; f < src.fields.size(); ++f) {
    const FieldAddressing sa = src.Addressing(f);
    const FieldAddressing da = dst.Addressing(f);
    std::array<std::vector<DimPiece>, kMaxDims> pieces;
    for (int d = 0; d < dims; ++d) {
      pieces[d] = SplitDim(sa.dims[d], src.bounds.lo[d], da.dims[d], dst.bounds.lo[d], box.lo[d],
                           box.hi[d]);
    }
    // Cartesian product of the dimensions' pieces, outermost dimension first.
    OpList ops;
    std::array<size_t, kMaxDims> idx{};
    while (true) {
      CopyOp op;
      op.src_offset = sa.base;
      op.dst_offset = da.base;
      op.run_bytes = sa.element_bytes;
      for (int d = dims - 1; d >= 0; --d) {
        const DimPiece& p = pieces[d][idx[d]];
        op.src_offset += p.src_start;
        op.dst_offset += p.dst_start;
        op.loops[op.num_loops++] = p.outer;
        op.loops[op.num_loops++] = p.inner;
      }
      Canonicalize(op);
      ops.push_back(op);
      int d = 0;
      while (d < dims && ++idx[d] == pieces[d].size()) {
        idx[d++] = 0;
      }
      if (d == dims) {
        break;
      }
    }
    per_field.push_back(std::move(ops));
  }

  std::vector<OpList> groups;
  for (OpList& ops : per_field) {
    if (groups.empty() || !TryFuseAdjacent(groups.back(), ops)) {
      groups.push_back(std::move(ops));
    }
  }
  groups = LoopOverFields(std::move(groups));

  for (const OpList& g : groups) {
    for (const CopyOp& op : g) {
      // Loop-free ops that continue the previous one on both sides coalesce.
      if (!program.ops.empty()) {
        CopyOp& last = program.ops.back();
        if (last.num_loops == 0 && op.num_loops == 0 &&
            last.src_offset + last.run_bytes == op.src_offset &&
            last.dst_offset + last.run_bytes == op.dst_offset) {
          last.run_bytes += op.run_bytes;
          continue;
        }
      }
      program.ops.push_back(op);
    }
  }
  OpList scheduled;
  for (const CopyOp& op : program.ops) {
    Tile(op, scheduled);
  }
  program.ops = std::move(scheduled);
  TallyProgram(program);
  return program;
}

}  // namespace isometry
