#include "layout/form_compiler.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "layout/compiler.h"

namespace isometry {

namespace {

uint64_t U(int64_t v) { return static_cast<uint64_t>(v); }

// Ops in a repeating block the recompression looks for: enough for the
// common period of a strided datatype and a layout point of fields of
// different sizes (8-byte runs against 5-byte points repeat every 40 bytes,
// some 20 ops). Each position tries every period, so this bounds the cost
// of recompressing an irregular walk.
constexpr size_t kMaxCopyPeriod = 128;

// Drops unit loops, folds an inner loop contiguous on both sides into the
// run, and merges two loops where the outer steps by the inner's span on
// both sides. Loop order is kept (pack order).
void CanonicalizeOp(CopyOp& op) {
  std::vector<CopyLoop> loops;
  for (int i = 0; i < op.num_loops; ++i) {
    if (op.loops[i].count != 1) {
      loops.push_back(op.loops[i]);
    }
  }
  FoldLoops(std::move(loops), op);
}

// A piece as loops over units of g bytes, innermost first.
std::vector<FormLoop> UnitLoops(const FormPiece& p, int64_t g) {
  std::vector<FormLoop> l(p.loops.rbegin(), p.loops.rend());
  if (p.run / g > 1) {
    l.insert(l.begin(), FormLoop{p.run / g, g});
  }
  return l;
}

// One op for two pieces of equal bytes when one's counts refine the other's
// (mixed-radix: from the innermost level, the smaller count divides the
// larger); nullopt otherwise.
std::optional<CopyOp> PairPieces(const FormPiece& a, const FormPiece& b, int64_t sa0, int64_t sb0) {
  const int64_t g = std::gcd(a.run, b.run);
  const std::vector<FormLoop> la = UnitLoops(a, g), lb = UnitLoops(b, g);
  std::vector<CopyLoop> out;  // innermost first
  size_t ia = 0, ib = 0;
  FormLoop ca = ia < la.size() ? la[0] : FormLoop{}, cb = ib < lb.size() ? lb[0] : FormLoop{};
  while (ia < la.size() && ib < lb.size()) {
    if (ca.count == cb.count) {
      out.push_back({U(ca.count), U(ca.stride), U(cb.stride)});
      if (++ia < la.size()) {
        ca = la[ia];
      }
      if (++ib < lb.size()) {
        cb = lb[ib];
      }
    } else if (ca.count < cb.count) {
      if (cb.count % ca.count != 0) {
        return std::nullopt;
      }
      out.push_back({U(ca.count), U(ca.stride), U(cb.stride)});
      cb = {cb.count / ca.count, cb.stride * ca.count};
      if (++ia < la.size()) {
        ca = la[ia];
      }
    } else {
      if (ca.count % cb.count != 0) {
        return std::nullopt;
      }
      out.push_back({U(cb.count), U(ca.stride), U(cb.stride)});
      ca = {ca.count / cb.count, ca.stride * cb.count};
      if (++ib < lb.size()) {
        cb = lb[ib];
      }
    }
  }
  if (ia != la.size() || ib != lb.size() || out.size() > static_cast<size_t>(kMaxCopyLoops)) {
    return std::nullopt;
  }
  CopyOp op;
  op.src_offset = U(a.offset - sa0);
  op.dst_offset = U(b.offset - sb0);
  op.run_bytes = U(g);
  op.num_loops = static_cast<int>(out.size());
  std::reverse_copy(out.begin(), out.end(), op.loops.begin());
  CanonicalizeOp(op);
  return op;
}

// Walks a form's runs in pack order without expanding it.
class RunCursor {
 public:
  explicit RunCursor(const CanonicalForm& f) : f_(f) { StartPiece(); }
  bool done() const { return piece_ >= f_.pieces.size(); }
  int64_t offset() const { return base_ + used_; }
  int64_t left() const { return cur_->run - used_; }
  void Advance(int64_t n) {
    used_ += n;
    if (used_ < cur_->run) {
      return;
    }
    used_ = 0;
    if (!Step(*cur_, idx_, base_)) {
      NextSimple();
    }
  }

 private:
  // Advances a loop nest's indices; false (indices and base restored) once
  // it has wrapped around.
  static bool Step(const FormPiece& p, std::vector<int64_t>& idx, int64_t& base) {
    for (size_t k = p.loops.size(); k-- > 0;) {
      base += p.loops[k].stride;
      if (++idx[k] < p.loops[k].count) {
        return true;
      }
      base -= p.loops[k].count * p.loops[k].stride;
      idx[k] = 0;
    }
    return false;
  }
  void StartSimple(const FormPiece& p, int64_t base) {
    cur_ = &p;
    base_ = base;
    idx_.assign(p.loops.size(), 0);
  }
  void StartPiece() {
    if (done()) {
      return;
    }
    const FormPiece& p = f_.pieces[piece_];
    if (p.body.empty()) {
      StartSimple(p, p.offset);
      return;
    }
    group_base_ = p.offset;
    group_idx_.assign(p.loops.size(), 0);
    body_ = 0;
    StartSimple(p.body[0], group_base_ + p.body[0].offset);
  }
  void NextSimple() {
    const FormPiece& p = f_.pieces[piece_];
    if (!p.body.empty()) {
      if (++body_ < p.body.size()) {
        StartSimple(p.body[body_], group_base_ + p.body[body_].offset);
        return;
      }
      body_ = 0;
      if (Step(p, group_idx_, group_base_)) {
        StartSimple(p.body[0], group_base_ + p.body[0].offset);
        return;
      }
    }
    ++piece_;
    StartPiece();
  }

  const CanonicalForm& f_;
  size_t piece_ = 0;
  // The group being walked, when pieces_[piece_] is one.
  std::vector<int64_t> group_idx_;
  int64_t group_base_ = 0;
  size_t body_ = 0;
  // The simple piece being walked.
  const FormPiece* cur_ = nullptr;
  std::vector<int64_t> idx_;
  int64_t base_ = 0;
  int64_t used_ = 0;
};

Status TooManyOps(size_t n, const CanonicalForm& src, const CanonicalForm& dst) {
  return ResourceExhausted(
      "packed copy: the program needs ", n, " ops, more than the ", kMaxFormCopyOps,
      "-op bound (per chunk): the source's runs (", src.runs(), " in ", src.pieces.size(),
      " pieces) and the destination's (", dst.runs(), " in ", dst.pieces.size(),
      " pieces) do not pair into a pattern repeating within ", kMaxCopyPeriod,
      " ops; pack/unpack this copy instead");
}

Result<std::vector<CopyOp>> WalkPairs(const CanonicalForm& src, const CanonicalForm& dst,
                                      int64_t s0, int64_t d0) {
  std::vector<CopyOp> ops;
  RunCursor s(src), d(dst);
  int64_t walked = 0;
  while (!s.done() && !d.done()) {
    if (++walked > kMaxFormCopyRuns) {
      return ResourceExhausted("packed copy: more than ", kMaxFormCopyRuns,
                               " irregular runs to pair in one chunk (source ", src.runs(),
                               " runs, destination ", dst.runs(),
                               "); pack/unpack this copy instead");
    }
    const int64_t n = std::min(s.left(), d.left());
    const uint64_t so = U(s.offset() - s0), dof = U(d.offset() - d0);
    if (!ops.empty() && ops.back().num_loops == 0 &&
        ops.back().src_offset + ops.back().run_bytes == so &&
        ops.back().dst_offset + ops.back().run_bytes == dof) {
      ops.back().run_bytes += U(n);
    } else {
      CopyOp op;
      op.src_offset = so;
      op.dst_offset = dof;
      op.run_bytes = U(n);
      ops.push_back(op);
    }
    s.Advance(n);
    d.Advance(n);
  }
  return ops;
}

bool SameShape(const CopyOp& a, const CopyOp& b) {
  if (a.run_bytes != b.run_bytes || a.num_loops != b.num_loops) {
    return false;
  }
  return std::equal(a.loops.begin(), a.loops.begin() + a.num_loops, b.loops.begin());
}

// ops[b, b+p) repeat ops[b-p, b) with the steps ops[a+p, a+2p) took from
// ops[a, a+p): a block may repeat with a different step per op (SOA fields
// of different sizes step by their own size), since each op gets its own
// outer loop.
bool Repeats(const std::vector<CopyOp>& ops, size_t a, size_t b, size_t p) {
  for (size_t k = 0; k < p; ++k) {
    const CopyOp& x = ops[b - p + k];
    const CopyOp& y = ops[b + k];
    if (!SameShape(x, y) || x.num_loops >= kMaxCopyLoops ||
        y.src_offset - x.src_offset != ops[a + p + k].src_offset - ops[a + k].src_offset ||
        y.dst_offset - x.dst_offset != ops[a + p + k].dst_offset - ops[a + k].dst_offset) {
      return false;
    }
  }
  return true;
}

// ops[i+p, i+2p) step from ops[i, i+p) all by the same amount.
bool CommonStep(const std::vector<CopyOp>& ops, size_t i, size_t p) {
  for (size_t k = 1; k < p; ++k) {
    if (ops[i + p + k].src_offset - ops[i + k].src_offset !=
            ops[i + p].src_offset - ops[i].src_offset ||
        ops[i + p + k].dst_offset - ops[i + k].dst_offset !=
            ops[i + p].dst_offset - ops[i].dst_offset) {
      return false;
    }
  }
  return true;
}

// ops[i+p, i+2p) have the shapes of ops[i, i+p), each with a loop to spare.
bool ShapesMatch(const std::vector<CopyOp>& ops, size_t i, size_t p) {
  for (size_t k = 0; k < p; ++k) {
    if (!SameShape(ops[i + k], ops[i + p + k]) || ops[i + k].num_loops >= kMaxCopyLoops) {
      return false;
    }
  }
  return true;
}

// How many times the block ops[i, i+p) repeats from i (1: not at all). Any
// two blocks of equal shapes "repeat" once with per-op steps, so a block of
// several ops repeating only once counts when all its ops step alike (it
// then is one shift of the block); per-op steps need a third repetition.
size_t RepeatCount(const std::vector<CopyOp>& ops, size_t i, size_t p) {
  const size_t n = ops.size();
  if (i + 3 * p <= n && Repeats(ops, i, i + 2 * p, p) && ShapesMatch(ops, i, p)) {
    size_t r = 3;
    while (i + (r + 1) * p <= n && Repeats(ops, i, i + r * p, p)) ++r;
    return r;
  }
  return CommonStep(ops, i, p) && ShapesMatch(ops, i, p) ? 2 : 1;
}

// One recompression level: the longest repetition of a block of up to
// kMaxCopyPeriod ops starting at each position becomes one outer loop per op.
bool CompressPass(std::vector<CopyOp>& ops) {
  std::vector<CopyOp> out;
  bool any = false;
  size_t i = 0;
  while (i < ops.size()) {
    size_t best_p = 0, best_r = 1;
    for (size_t p = 1; p <= kMaxCopyPeriod && i + 2 * p <= ops.size(); ++p) {
      if (!SameShape(ops[i], ops[i + p])) continue;
      const size_t r = RepeatCount(ops, i, p);
      if (r >= 2 && r * p > best_r * best_p) {
        best_p = p;
        best_r = r;
      }
    }
    if (best_p == 0) {
      out.push_back(ops[i++]);
      continue;
    }
    for (size_t k = 0; k < best_p; ++k) {
      CopyOp op = ops[i + k];
      const CopyOp& next = ops[i + best_p + k];
      std::move_backward(op.loops.begin(), op.loops.begin() + op.num_loops,
                         op.loops.begin() + op.num_loops + 1);
      op.loops[0] = {best_r, next.src_offset - op.src_offset, next.dst_offset - op.dst_offset};
      ++op.num_loops;
      CanonicalizeOp(op);
      out.push_back(op);
    }
    i += best_p * best_r;
    any = true;
  }
  ops = std::move(out);
  return any;
}

void Compress(std::vector<CopyOp>& ops) {
  for (int pass = 0; pass < 2 * kMaxCopyLoops && CompressPass(ops); ++pass) {
  }
}

// Pieces that pair one to one (equal bytes) and refine each other.
std::optional<std::vector<CopyOp>> PairAligned(const CanonicalForm& src, const CanonicalForm& dst,
                                               int64_t s0, int64_t d0) {
  if (src.pieces.size() != dst.pieces.size()) {
    return std::nullopt;
  }
  std::vector<CopyOp> ops;
  for (size_t i = 0; i < src.pieces.size(); ++i) {
    if (src.pieces[i].bytes() != dst.pieces[i].bytes() || !src.pieces[i].body.empty() ||
        !dst.pieces[i].body.empty()) {
      return std::nullopt;
    }
    std::optional<CopyOp> op = PairPieces(src.pieces[i], dst.pieces[i], s0, d0);
    if (!op) {
      return std::nullopt;
    }
    ops.push_back(*op);
  }
  return ops;
}

}  // namespace

Result<FormCopy> CompileFormCopy(const CanonicalForm& src, const CanonicalForm& dst) {
  if (src.bytes() != dst.bytes()) {
    return InvalidArgument("datatype copy: the source packs ", src.bytes(),
                           " bytes but the destination holds ", dst.bytes());
  }
  FormCopy fc;
  fc.src_shift = src.lowest();
  fc.dst_shift = dst.lowest();
  std::vector<CopyOp> ops;
  if (auto aligned = PairAligned(src, dst, fc.src_shift, fc.dst_shift)) {
    ops = std::move(*aligned);
  } else {
    ISO_ASSIGN_OR_RETURN(ops, WalkPairs(src, dst, fc.src_shift, fc.dst_shift));
  }
  Compress(ops);
  if (ops.size() > kMaxFormCopyOps) {
    return TooManyOps(ops.size(), src, dst);
  }
  fc.program.ops = std::move(ops);
  TallyProgram(fc.program);
  return fc;
}

Result<FormCopy> CompileDatatypeCopy(const Datatype& src, int64_t src_count, const Datatype& dst,
                                     int64_t dst_count) {
  ISO_ASSIGN_OR_RETURN(CanonicalForm s, DatatypeForm(src, src_count));
  ISO_ASSIGN_OR_RETURN(CanonicalForm d, DatatypeForm(dst, dst_count));
  return CompileFormCopy(s, d);
}

Result<FormCopy> CompileDatatypeToLayout(const Datatype& src, int64_t src_count,
                                         const InstanceShape& dst, const Box& dst_box) {
  ISO_ASSIGN_OR_RETURN(CanonicalForm s, DatatypeForm(src, src_count));
  ISO_ASSIGN_OR_RETURN(CanonicalForm d, LayoutForm(dst, dst_box));
  return CompileFormCopy(s, d);
}

Result<FormCopy> CompileLayoutToDatatype(const InstanceShape& src, const Box& src_box,
                                         const Datatype& dst, int64_t dst_count) {
  ISO_ASSIGN_OR_RETURN(CanonicalForm s, LayoutForm(src, src_box));
  ISO_ASSIGN_OR_RETURN(CanonicalForm d, DatatypeForm(dst, dst_count));
  return CompileFormCopy(s, d);
}

Result<FormCopy> CompileLayoutCopy(const InstanceShape& src, const InstanceShape& dst,
                                   const Box& box) {
  FormCopy fc;
  ISO_ASSIGN_OR_RETURN(fc.program, CompileCopy(src, dst, box));
  return fc;
}

FormCopyCounts CountsOf(const CanonicalForm& src, const CanonicalForm& dst,
                        const CopyProgram& program) {
  return FormCopyCounts{src.bytes(), src.runs(), dst.runs(), program.runs};
}

}  // namespace isometry
