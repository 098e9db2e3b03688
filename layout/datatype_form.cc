#include "layout/datatype_form.h"

#include <algorithm>
#include <array>

namespace isometry {

namespace {

using Wide = __int128;

// The form of one element of a node, when that node is a single canonical
// piece (or holds no bytes); kIrregular sends the caller to segment walking.
struct Nest {
  enum State : uint8_t { kEmpty, kRegular, kIrregular };
  State state = kEmpty;
  FormPiece piece;
};

Nest Irregular() { return Nest{Nest::kIrregular, {}}; }

// Folds what the greedy grouping would never produce: unit loops, an inner
// loop stepping by the run (dense: part of the run), and two loops where the
// outer steps by the inner's whole span (one loop).
void Fold(FormPiece& p) {
  std::erase_if(p.loops, [](const FormLoop& l) { return l.count == 1; });
  bool changed = true;
  while (changed) {
    changed = false;
    if (!p.loops.empty() && p.loops.back().stride == p.run) {
      p.run *= p.loops.back().count;
      p.loops.pop_back();
      changed = true;
      continue;
    }
    for (size_t i = 1; i < p.loops.size(); ++i) {
      const FormLoop inner = p.loops[i];
      if (Wide{p.loops[i - 1].stride} == Wide{inner.count} * inner.stride) {
        p.loops[i - 1] = {p.loops[i - 1].count * inner.count, inner.stride};
        p.loops.erase(p.loops.begin() + static_cast<ptrdiff_t>(i));
        changed = true;
        break;
      }
    }
  }
}

// True when greedy grouping of this nest's runs gives back exactly this
// nest: no two runs across a loop boundary touch (they would merge), and at
// no level does the step across an outer boundary equal the level's stride
// (the chain would continue across it). Loops are folded already.
bool IsCanonical(const FormPiece& p) {
  const size_t k = p.loops.size();
  if (k > static_cast<size_t>(kMaxFormLoops)) {
    return false;
  }
  for (size_t level = 0; level < k; ++level) {
    for (size_t j = 0; j < level; ++j) {
      // Step between the starts of consecutive level-`level` sub-nests
      // where loop j advances and loops j+1..level restart.
      Wide d = p.loops[j].stride;
      for (size_t i = j + 1; i <= level; ++i) {
        d -= Wide{p.loops[i].count - 1} * p.loops[i].stride;
      }
      if (d == p.loops[level].stride) {
        return false;
      }
      if (level + 1 == k && d == p.run) {
        return false;
      }
    }
  }
  return k == 0 || p.loops.back().stride != p.run;
}

Nest Repeat(Nest n, int64_t count, int64_t stride) {
  if (n.state != Nest::kRegular || count == 1) {
    return n;
  }
  if (count == 0) {
    return Nest{};
  }
  n.piece.loops.insert(n.piece.loops.begin(), FormLoop{count, stride});
  Fold(n.piece);
  return IsCanonical(n.piece) ? n : Irregular();
}

Nest Shift(Nest n, int64_t by) {
  n.piece.offset += by;
  return n;
}

bool SameShape(const FormPiece& a, const FormPiece& b) {
  return a.run == b.run && a.loops == b.loops;
}

// Consecutive blocks in pack order, each one nest: one nest when the
// non-empty ones are equal in shape at a constant step.
Nest Combine(const std::vector<Nest>& blocks) {
  std::vector<const FormPiece*> v;
  for (const Nest& b : blocks) {
    if (b.state == Nest::kIrregular) {
      return Irregular();
    }
    if (b.state == Nest::kRegular) {
      v.push_back(&b.piece);
    }
  }
  if (v.empty()) {
    return Nest{};
  }
  if (v.size() == 1) {
    return Nest{Nest::kRegular, *v[0]};
  }
  const int64_t step = v[1]->offset - v[0]->offset;
  for (size_t i = 1; i < v.size(); ++i) {
    if (!SameShape(*v[i], *v[0]) || v[i]->offset - v[i - 1]->offset != step) {
      return Irregular();
    }
  }
  return Repeat(Nest{Nest::kRegular, *v[0]}, static_cast<int64_t>(v.size()), step);
}

// Groups a walked run list (0-loop pieces) and reports whether it is one piece.
Nest FromRuns(std::vector<FormPiece> runs) {
  if (runs.empty()) {
    return Nest{};
  }
  runs = GroupPieces(std::move(runs));
  return runs.size() == 1 ? Nest{Nest::kRegular, std::move(runs[0])} : Irregular();
}

// Small irregular-looking nodes (struct {int; double}, indexed with uneven
// blocks that touch) are walked: a single element of at most this many runs.
constexpr uint64_t kWalkNodeRuns = 4096;

Nest WalkNode(const Datatype& t) {
  if (t.info().max_segments > kWalkNodeRuns) {
    return Irregular();
  }
  std::vector<FormPiece> runs;
  const Status st = ForEachSegment(t, 1, [&](const Segment& s) {
    runs.push_back(FormPiece{s.offset, s.length, {}});
    return true;
  });
  return st.ok() ? FromRuns(std::move(runs)) : Irregular();
}

Nest NestOf(const Datatype& t);

// `n` consecutive elements of t from `at`, one extent apart.
Nest BlockOf(const Datatype& t, int64_t at, int64_t n) {
  return Shift(Repeat(NestOf(t), n, t.extent()), at);
}

Nest ArrayNest(const DatatypeNode& n) {
  Nest inner = NestOf(n.children[0]);
  for (size_t k = n.dims.size(); k-- > 0;) {
    const ArrayDim& d = n.dims[k];
    const Nest block = Repeat(inner, d.block, d.elem_stride);
    std::vector<Nest> parts;
    if (d.full_blocks > 0) {
      parts.push_back(
          Shift(Repeat(block, d.full_blocks, d.cycle * d.elem_stride), d.first * d.elem_stride));
    }
    if (d.tail > 0) {
      parts.push_back(Shift(Repeat(inner, d.tail, d.elem_stride),
                            (d.first + d.full_blocks * d.cycle) * d.elem_stride));
    }
    inner = Combine(parts);
    if (inner.state == Nest::kIrregular) {
      return inner;
    }
  }
  return inner;
}

Nest NestOf(const Datatype& t) {
  const DatatypeNode& n = t.node();
  const DatatypeInfo& info = n.info;
  if (info.size == 0) {
    return Nest{};
  }
  if (info.dense || n.kind == DatatypeKind::kBasic) {
    return Nest{Nest::kRegular, FormPiece{info.lb, info.size, {}}};
  }
  switch (n.kind) {
    case DatatypeKind::kContiguous:
      return BlockOf(n.children[0], 0, n.count);
    case DatatypeKind::kVector:
      return Repeat(BlockOf(n.children[0], 0, n.blocklength), n.count, n.stride);
    case DatatypeKind::kResized:
      return NestOf(n.children[0]);
    case DatatypeKind::kIndexed:
    case DatatypeKind::kIndexedBlock:
    case DatatypeKind::kStruct: {
      std::vector<Nest> blocks;
      for (size_t i = 0; i < n.displacements.size(); ++i) {
        const Datatype& c = n.kind == DatatypeKind::kStruct ? n.children[i] : n.children[0];
        const int64_t len =
            n.kind == DatatypeKind::kIndexedBlock ? n.blocklength : n.blocklengths[i];
        blocks.push_back(BlockOf(c, n.displacements[i], len));
      }
      const Nest r = Combine(blocks);
      return r.state == Nest::kIrregular ? WalkNode(t) : r;
    }
    case DatatypeKind::kSubarray:
    case DatatypeKind::kDarray: {
      const Nest r = ArrayNest(n);
      return r.state == Nest::kIrregular ? WalkNode(t) : r;
    }
    case DatatypeKind::kBasic:
      break;
  }
  return Irregular();
}

Status CheckPieces(const std::vector<FormPiece>& pieces) {
  if (pieces.size() > kMaxFormPieces) {
    return ResourceExhausted("canonical form: ", pieces.size(), " irregular pieces exceed the ",
                             kMaxFormPieces, "-piece bound; pack/unpack such a type instead");
  }
  return OkStatus();
}

Status WalkLimitError() {
  return ResourceExhausted("canonical form: more than ", kMaxFormWalkSegments,
                           " irregular contiguous runs to walk; pack/unpack such a type instead");
}

// One greedy level: consecutive pieces with exactly `inner_loops` loops and
// equal shape at a constant step become one piece with an outer loop.
bool GroupLevel(std::vector<FormPiece>& pieces, size_t inner_loops) {
  std::vector<FormPiece> out;
  out.reserve(pieces.size());
  bool any = false;
  size_t i = 0;
  while (i < pieces.size()) {
    const FormPiece& first = pieces[i];
    size_t j = i + 1;
    if (first.loops.size() == inner_loops) {
      while (j < pieces.size() && SameShape(pieces[j], first) &&
             (j == i + 1 ||
              pieces[j].offset - pieces[j - 1].offset == pieces[i + 1].offset - pieces[i].offset)) {
        ++j;
      }
    }
    if (j - i == 1) {
      out.push_back(std::move(pieces[i]));
    } else {
      FormPiece p = std::move(pieces[i]);
      p.loops.insert(p.loops.begin(),
                     FormLoop{static_cast<int64_t>(j - i), pieces[i + 1].offset - p.offset});
      out.push_back(std::move(p));
      any = true;
    }
    i = j;
  }
  pieces = std::move(out);
  return any;
}

// Appends a run in pack order, merging it into the previous one it continues.
void AppendRun(std::vector<FormPiece>& runs, int64_t offset, int64_t length) {
  if (!runs.empty() && runs.back().offset + runs.back().run == offset) {
    runs.back().run += length;
    return;
  }
  runs.push_back(FormPiece{offset, length, {}});
}

// One point's fields as one nest, repeated over the box's dimensions (last
// fastest) when every field is addressed alike in each dimension (AOS, or
// SOA with equal field sizes) and each dimension's range is affine.
Nest LayoutNest(const InstanceShape& shape, const Box& box) {
  std::vector<FieldAddressing> fa;
  std::vector<FormPiece> runs;
  for (size_t f = 0; f < shape.fields.size(); ++f) {
    fa.push_back(shape.Addressing(f));
    AppendRun(runs, static_cast<int64_t>(fa[f].base), fa[f].element_bytes);
  }
  for (int d = 0; d < box.dims; ++d) {
    for (const FieldAddressing& a : fa) {
      const DimAddressing& m = a.dims[d];
      const DimAddressing& m0 = fa[0].dims[d];
      if (m.block != m0.block || m.stride_in != m0.stride_in || m.stride_out != m0.stride_out) {
        return Irregular();
      }
    }
  }
  Nest inner = FromRuns(std::move(runs));
  for (int d = box.dims - 1; d >= 0 && inner.state == Nest::kRegular; --d) {
    const DimAddressing& m = fa[0].dims[d];
    const int64_t r0 = box.lo[d] - shape.bounds.lo[d];
    const int64_t n = box.extent(d);
    const auto in = static_cast<int64_t>(m.stride_in);
    const auto out = static_cast<int64_t>(m.stride_out);
    if (m.block == 0) {
      inner = Shift(Repeat(inner, n, in), r0 * in);
    } else if (r0 % m.block + n <= m.block) {
      inner = Shift(Repeat(inner, n, in), (r0 / m.block) * out + (r0 % m.block) * in);
    } else if (r0 % m.block == 0 && n % m.block == 0) {
      inner = Shift(Repeat(Repeat(inner, m.block, in), n / m.block, out), (r0 / m.block) * out);
    } else {
      return Irregular();
    }
  }
  return inner;
}

// Every (point, field) of the box in AOS C order, merged; bounded.
Result<std::vector<FormPiece>> WalkLayout(const InstanceShape& shape, const Box& box) {
  std::vector<FormPiece> runs;
  std::array<int64_t, kMaxDims> x = box.lo;
  while (true) {
    for (size_t f = 0; f < shape.fields.size(); ++f) {
      if (static_cast<int64_t>(runs.size()) >= kMaxFormWalkSegments) {
        return WalkLimitError();
      }
      AppendRun(runs, static_cast<int64_t>(shape.OffsetOf(f, x)), shape.fields.fields()[f].size);
    }
    int d = box.dims - 1;
    while (d >= 0 && ++x[d] == box.hi[d]) {
      x[d] = box.lo[d];
      --d;
    }
    if (d < 0) {
      return runs;
    }
  }
}

}  // namespace

uint64_t FormPiece::runs() const {
  uint64_t n = 1;
  for (const FormLoop& l : loops) {
    n = __builtin_mul_overflow(n, static_cast<uint64_t>(l.count), &n) ? UINT64_MAX : n;
  }
  return n;
}

uint64_t FormPiece::bytes() const {
  uint64_t b = 0;
  return __builtin_mul_overflow(runs(), static_cast<uint64_t>(run), &b) ? UINT64_MAX : b;
}

int64_t FormPiece::lowest() const {
  int64_t lo = offset;
  for (const FormLoop& l : loops) {
    lo += std::min<int64_t>(0, (l.count - 1) * l.stride);
  }
  return lo;
}

uint64_t CanonicalForm::bytes() const {
  uint64_t b = 0;
  for (const FormPiece& p : pieces) {
    b = __builtin_add_overflow(b, p.bytes(), &b) ? UINT64_MAX : b;
  }
  return b;
}

uint64_t CanonicalForm::runs() const {
  uint64_t n = 0;
  for (const FormPiece& p : pieces) {
    n = __builtin_add_overflow(n, p.runs(), &n) ? UINT64_MAX : n;
  }
  return n;
}

int64_t CanonicalForm::lowest() const {
  if (pieces.empty()) {
    return 0;
  }
  int64_t lo = pieces[0].lowest();
  for (const FormPiece& p : pieces) {
    lo = std::min(lo, p.lowest());
  }
  return lo;
}

std::vector<FormPiece> GroupPieces(std::vector<FormPiece> pieces) {
  for (size_t level = 0; level < static_cast<size_t>(kMaxFormLoops); ++level) {
    const bool any = GroupLevel(pieces, level);
    if (!any && std::none_of(pieces.begin(), pieces.end(),
                             [&](const FormPiece& p) { return p.loops.size() > level; })) {
      break;
    }
  }
  return pieces;
}

Result<CanonicalForm> DatatypeForm(const Datatype& type, int64_t count) {
  ISO_RETURN_IF_ERROR(SpanOfElements(type, count).status());
  CanonicalForm form;
  const Nest n = Repeat(NestOf(type), count, type.extent());
  if (n.state == Nest::kEmpty) {
    return form;
  }
  if (n.state == Nest::kRegular) {
    form.pieces.push_back(n.piece);
    return form;
  }
  std::vector<FormPiece> runs;
  bool too_many = false;
  ISO_RETURN_IF_ERROR(ForEachSegment(type, count, [&](const Segment& s) {
    if (static_cast<int64_t>(runs.size()) >= kMaxFormWalkSegments) {
      too_many = true;
      return false;
    }
    runs.push_back(FormPiece{s.offset, s.length, {}});
    return true;
  }));
  if (too_many) {
    return WalkLimitError();
  }
  form.pieces = GroupPieces(std::move(runs));
  ISO_RETURN_IF_ERROR(CheckPieces(form.pieces));
  return form;
}

std::string SerializeForm(const CanonicalForm& form) {
  std::string out = "ISOFORM1";
  auto put = [&](int64_t v) {
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) {
      out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    }
  };
  put(static_cast<int64_t>(form.pieces.size()));
  for (const FormPiece& p : form.pieces) {
    put(p.offset);
    put(p.run);
    put(static_cast<int64_t>(p.loops.size()));
    for (const FormLoop& l : p.loops) {
      put(l.count);
      put(l.stride);
    }
  }
  return out;
}

uint64_t FormHash(const CanonicalForm& form) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : SerializeForm(form)) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

}  // namespace isometry

namespace isometry {

Result<CanonicalForm> LayoutForm(const InstanceShape& shape, const Box& box) {
  ISO_RETURN_IF_ERROR(shape.Validate("instance"));
  ISO_RETURN_IF_ERROR(box.Validate("box"));
  ISO_RETURN_IF_ERROR(CheckCopyDimensions(shape.bounds, shape.bounds, box));
  if (!shape.bounds.contains(box)) {
    return OutOfRange("layout form: box ", ToString(box), " lies outside the index space ",
                      ToString(shape.bounds));
  }
  CanonicalForm form;
  if (box.empty()) {
    return form;
  }
  const Nest n = LayoutNest(shape, box);
  if (n.state == Nest::kRegular) {
    form.pieces.push_back(n.piece);
    return form;
  }
  ISO_ASSIGN_OR_RETURN(std::vector<FormPiece> runs, WalkLayout(shape, box));
  form.pieces = GroupPieces(std::move(runs));
  ISO_RETURN_IF_ERROR(CheckPieces(form.pieces));
  return form;
}

}  // namespace isometry
