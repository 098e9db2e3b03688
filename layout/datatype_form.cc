#include "layout/datatype_form.h"

#include <algorithm>
#include <array>
#include <unordered_map>

namespace isometry {

namespace {

using Wide = __int128;

// The form of one element of a node when it is known without walking the
// whole tree: kRegular, one simple canonical piece; kGroup, one group piece
// (terminal: a parent repeating it walks instead); kList, the merged runs of
// one small irregular element (a padded struct), which a repeat may turn
// into a group; kIrregular sends the caller to segment walking.
struct Nest {
  enum State : uint8_t { kEmpty, kRegular, kGroup, kList, kIrregular };
  State state = kEmpty;
  FormPiece piece;
  std::vector<FormPiece> runs;  // kList
};

// Appends a run in pack order, merging it into the previous one it continues.
void AppendRun(std::vector<FormPiece>& runs, int64_t offset, int64_t length) {
  if (!runs.empty() && runs.back().offset + runs.back().run == offset) {
    runs.back().run += length;
    return;
  }
  runs.push_back(FormPiece{offset, length, {}, {}});
}

Nest Irregular() { return Nest{Nest::kIrregular, {}, {}}; }
Nest Regular(FormPiece p) { return Nest{Nest::kRegular, std::move(p), {}}; }

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

Nest RepeatList(const Nest& n, int64_t count, int64_t stride);

Nest Repeat(Nest n, int64_t count, int64_t stride) {
  if (n.state == Nest::kEmpty || n.state == Nest::kIrregular || count == 1) {
    return n;
  }
  if (count == 0) {
    return Nest{};
  }
  if (n.state == Nest::kList) {
    return RepeatList(n, count, stride);
  }
  if (n.state == Nest::kGroup) {
    return Irregular();
  }
  n.piece.loops.insert(n.piece.loops.begin(), FormLoop{count, stride});
  Fold(n.piece);
  return IsCanonical(n.piece) ? n : Irregular();
}

Nest Shift(Nest n, int64_t by) {
  n.piece.offset += by;
  for (FormPiece& r : n.runs) {
    r.offset += by;
  }
  return n;
}

bool SameShape(const FormPiece& a, const FormPiece& b) {
  return a.run == b.run && a.loops == b.loops && a.body == b.body;
}

// Consecutive blocks in pack order, each one nest: one nest when the
// non-empty ones are equal in shape at a constant step.
Nest Combine(const std::vector<Nest>& blocks) {
  std::vector<const Nest*> nonempty;
  for (const Nest& b : blocks) {
    if (b.state != Nest::kEmpty) {
      nonempty.push_back(&b);
    }
  }
  if (nonempty.empty()) {
    return Nest{};
  }
  if (nonempty.size() == 1) {
    return *nonempty[0];
  }
  std::vector<const FormPiece*> v;
  for (const Nest* b : nonempty) {
    if (b->state != Nest::kRegular) {
      return Irregular();
    }
    v.push_back(&b->piece);
  }
  const int64_t step = v[1]->offset - v[0]->offset;
  for (size_t i = 1; i < v.size(); ++i) {
    if (!SameShape(*v[i], *v[0]) || v[i]->offset - v[i - 1]->offset != step) {
      return Irregular();
    }
  }
  return Repeat(Regular(*v[0]), static_cast<int64_t>(v.size()), step);
}

// Groups a walked run list (0-loop pieces) and reports whether it is one piece.
Nest FromRuns(std::vector<FormPiece> runs) {
  if (runs.empty()) {
    return Nest{};
  }
  runs = GroupPieces(std::move(runs));
  return runs.size() == 1 && runs[0].body.empty() ? Regular(std::move(runs[0])) : Irregular();
}

// Small irregular-looking nodes (struct {int; double}, indexed with uneven
// blocks that touch) are walked: a single element of at most this many runs.
constexpr uint64_t kWalkNodeRuns = 4096;

// Builds the nests of one tree. A node shared by several parents (the old
// type of an indexed type's every block) is built once, and all walking of
// small nodes together stays within kMaxFormWalkSegments runs, so a
// description sent by a client costs O(weight + kMaxFormWalkSegments).
class NestBuilder {
 public:
  // The reference stays valid: the memo's nodes never move.
  const Nest& Of(const Datatype& t) {
    auto it = memo_.find(&t.node());
    if (it != memo_.end()) {
      return it->second;
    }
    Nest n = Build(t);
    return memo_.emplace(&t.node(), std::move(n)).first->second;
  }

 private:
  Nest Walk(const Datatype& t) {
    if (t.info().max_segments > kWalkNodeRuns ||
        static_cast<int64_t>(t.info().max_segments) > budget_) {
      return Irregular();
    }
    std::vector<FormPiece> runs;
    const Status st = ForEachSegment(t, 1, [&](const Segment& s) {
      runs.push_back(FormPiece{s.offset, s.length, {}, {}});
      return true;
    });
    budget_ -= static_cast<int64_t>(t.info().max_segments);
    if (!st.ok()) {
      return Irregular();
    }
    Nest n = FromRuns(runs);
    if (n.state == Nest::kIrregular) {
      n = Nest{Nest::kList, {}, std::move(runs)};
    }
    return n;
  }

  // `n` consecutive elements of t from `at`, one extent apart.
  Nest Block(const Datatype& t, int64_t at, int64_t n) {
    return Shift(Repeat(Of(t), n, t.extent()), at);
  }

  Nest Array(const DatatypeNode& n) {
    Nest inner = Of(n.children[0]);
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

  // Indexed, indexed_block and struct: the blocks combined when they are
  // regular, without building them when they cannot be.
  Nest Blocks(const DatatypeNode& n) {
    const bool is_struct = n.kind == DatatypeKind::kStruct;
    auto child = [&](size_t i) -> const Datatype& { return n.children[is_struct ? i : 0]; };
    auto len = [&](size_t i) {
      return n.kind == DatatypeKind::kIndexedBlock ? n.blocklength : n.blocklengths[i];
    };
    size_t nonempty = 0;
    bool all_regular = true;
    for (size_t i = 0; i < n.displacements.size(); ++i) {
      if (len(i) > 0 && child(i).size() > 0) {
        ++nonempty;
        all_regular = all_regular && Of(child(i)).state == Nest::kRegular;
      }
    }
    if (nonempty > 1 && !all_regular) {
      return Irregular();
    }
    std::vector<Nest> blocks;
    for (size_t i = 0; i < n.displacements.size(); ++i) {
      blocks.push_back(Block(child(i), n.displacements[i], len(i)));
    }
    return Combine(blocks);
  }

  Nest Build(const Datatype& t) {
    const DatatypeNode& n = t.node();
    const DatatypeInfo& info = n.info;
    if (info.size == 0) {
      return Nest{};
    }
    if (info.dense || n.kind == DatatypeKind::kBasic) {
      return Regular(FormPiece{info.lb, info.size, {}, {}});
    }
    Nest r;
    switch (n.kind) {
      case DatatypeKind::kContiguous:
        return Block(n.children[0], 0, n.count);
      case DatatypeKind::kVector:
        return Repeat(Block(n.children[0], 0, n.blocklength), n.count, n.stride);
      case DatatypeKind::kResized:
        return Of(n.children[0]);
      case DatatypeKind::kIndexed:
      case DatatypeKind::kIndexedBlock:
      case DatatypeKind::kStruct:
        r = Blocks(n);
        break;
      case DatatypeKind::kSubarray:
      case DatatypeKind::kDarray:
        r = Array(n);
        break;
      case DatatypeKind::kBasic:
        break;
    }
    return r.state == Nest::kIrregular ? Walk(t) : r;
  }

  std::unordered_map<const DatatypeNode*, Nest> memo_;
  int64_t budget_ = kMaxFormWalkSegments;
};

// What a bound error blames: the datatype, or the layout and why its
// stream is irregular.
constexpr char kDatatypeSide[] = "the datatype";
constexpr char kLayoutSide[] =
    "the layout (its fields are addressed differently, e.g. SOA over fields of different sizes, "
    "so its AOS C-order stream is a list of runs)";

const char* Remedy(const char* side) {
  return side == kDatatypeSide ? "; pack/unpack such a type instead"
                               : "; a copy on one node takes such a layout chunk by chunk, "
                                 "without this bound; elsewhere copy it to or from contiguous "
                                 "bytes first (a layout copy, unbounded)";
}

Status CheckPieces(const std::vector<FormPiece>& pieces, const char* side) {
  if (pieces.size() > kMaxFormPieces) {
    return ResourceExhausted("canonical form of ", side, ": ", pieces.size(),
                             " irregular pieces exceed the ", kMaxFormPieces, "-piece bound",
                             Remedy(side));
  }
  return OkStatus();
}

Status WalkLimitError(const char* side) {
  return ResourceExhausted("canonical form of ", side, ": more than ", kMaxFormWalkSegments,
                           " irregular contiguous runs to walk", Remedy(side));
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
        return WalkLimitError(kLayoutSide);
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

// Levels of the definition: chains of equal simple pieces (or of equal
// groups) at a constant step gain outer loops.
void GroupLevels(std::vector<FormPiece>& pieces) {
  for (size_t level = 0; level < static_cast<size_t>(kMaxFormLoops); ++level) {
    const bool any = GroupLevel(pieces, level);
    if (!any && std::none_of(pieces.begin(), pieces.end(),
                             [&](const FormPiece& p) { return p.loops.size() > level; })) {
      break;
    }
  }
}

// pieces[b, b+p) repeat pieces[a, a+p) moved by `step`, all simple.
bool BlockRepeats(const std::vector<FormPiece>& v, size_t a, size_t b, size_t p, int64_t step) {
  for (size_t k = 0; k < p; ++k) {
    if (!v[a + k].body.empty() || !SameShape(v[a + k], v[b + k]) ||
        v[b + k].offset - v[a + k].offset != step) {
      return false;
    }
  }
  return true;
}

// The period pass of the definition: at each position, the repetition of
// a block of 2..kMaxFormPeriod simple pieces covering the most pieces
// (ties: the shorter block) becomes one group piece.
bool PeriodPass(std::vector<FormPiece>& pieces) {
  std::vector<FormPiece> out;
  bool any = false;
  size_t i = 0;
  while (i < pieces.size()) {
    size_t best_p = 0, best_r = 1;
    for (size_t p = 2; p <= kMaxFormPeriod && i + 2 * p <= pieces.size(); ++p) {
      const int64_t step = pieces[i + p].offset - pieces[i].offset;
      size_t r = 1;
      while (i + (r + 1) * p <= pieces.size() &&
             BlockRepeats(pieces, i + (r - 1) * p, i + r * p, p, step)) {
        ++r;
      }
      if (r >= 2 && r * p > best_r * best_p) {
        best_p = p;
        best_r = r;
      }
    }
    if (best_p == 0) {
      out.push_back(std::move(pieces[i++]));
      continue;
    }
    FormPiece g;
    g.offset = pieces[i].offset;
    g.loops.push_back({static_cast<int64_t>(best_r), pieces[i + best_p].offset - g.offset});
    for (size_t k = 0; k < best_p; ++k) {
      g.body.push_back(std::move(pieces[i + k]));
      g.body.back().offset -= g.offset;
    }
    out.push_back(std::move(g));
    i += best_p * best_r;
    any = true;
  }
  pieces = std::move(out);
  return any;
}

std::vector<FormPiece> Moved(const std::vector<FormPiece>& v, int64_t by) {
  std::vector<FormPiece> out = v;
  for (FormPiece& p : out) {
    p.offset += by;
  }
  return out;
}

// `count` >= 2 copies of a small irregular element, `stride` apart, as one
// group piece, when that is what the definition gives: the element's pieces
// (at most kMaxFormPeriod, themselves without a period) do not interact
// across copies (checked on three copies: merging and chaining are between
// neighbours only), so the period pass takes them as one block.
Nest RepeatList(const Nest& n, int64_t count, int64_t stride) {
  std::vector<FormPiece> one = n.runs;
  GroupLevels(one);
  std::vector<FormPiece> probe = one;
  if (one.size() < 2 || one.size() > kMaxFormPeriod || PeriodPass(probe)) {
    return Irregular();
  }
  std::vector<FormPiece> three;
  for (int64_t k = 0; k < 3; ++k) {
    for (const FormPiece& r : n.runs) {
      AppendRun(three, r.offset + k * stride, r.run);
    }
  }
  GroupLevels(three);
  std::vector<FormPiece> want = one;
  for (int64_t k = 1; k < 3; ++k) {
    const std::vector<FormPiece> m = Moved(one, k * stride);
    want.insert(want.end(), m.begin(), m.end());
  }
  if (three != want) {
    return Irregular();
  }
  Nest g{Nest::kGroup, {}, {}};
  g.piece.offset = one[0].offset;
  g.piece.loops.push_back({count, stride});
  g.piece.body = Moved(one, -one[0].offset);
  return g;
}

}  // namespace

std::vector<FormPiece> GroupPieces(std::vector<FormPiece> pieces) {
  GroupLevels(pieces);
  if (PeriodPass(pieces)) {
    GroupLevels(pieces);  // only groups can still chain
  }
  return pieces;
}

Result<CanonicalForm> DatatypeForm(const Datatype& type, int64_t count) {
  ISO_RETURN_IF_ERROR(SpanOfElements(type, count).status());
  CanonicalForm form;
  const Nest n = Repeat(NestBuilder().Of(type), count, type.extent());
  if (n.state == Nest::kEmpty) {
    return form;
  }
  if (n.state == Nest::kRegular || n.state == Nest::kGroup) {
    form.pieces.push_back(n.piece);
    return form;
  }
  if (n.state == Nest::kList) {
    form.pieces = GroupPieces(n.runs);
    return form;
  }
  std::vector<FormPiece> runs;
  bool too_many = false;
  ISO_RETURN_IF_ERROR(ForEachSegment(type, count, [&](const Segment& s) {
    if (static_cast<int64_t>(runs.size()) >= kMaxFormWalkSegments) {
      too_many = true;
      return false;
    }
    runs.push_back(FormPiece{s.offset, s.length, {}, {}});
    return true;
  }));
  if (too_many) {
    return WalkLimitError(kDatatypeSide);
  }
  form.pieces = GroupPieces(std::move(runs));
  ISO_RETURN_IF_ERROR(CheckPieces(form.pieces, kDatatypeSide));
  return form;
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
  ISO_RETURN_IF_ERROR(CheckPieces(form.pieces, kLayoutSide));
  return form;
}

bool LayoutFormRegular(const InstanceShape& shape, const Box& box) {
  if (!shape.Validate("instance").ok() || !box.Validate("box").ok() || box.empty() ||
      box.dims != shape.bounds.dims || !shape.bounds.contains(box)) {
    return false;
  }
  return LayoutNest(shape, box).state == Nest::kRegular;
}

}  // namespace isometry
