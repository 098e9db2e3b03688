#include "planner/shape_algebra.h"

#include "planner/full_planner.h"

namespace isometry {
namespace full_planner_internal {

using Kind = LayoutComponent::Kind;

Shape ShapeOf(const Layout& l) {
  Shape s;
  for (const LayoutComponent& c : l.components()) {
    const auto dim = static_cast<int8_t>(c.dim);
    switch (c.kind) {
      case Kind::kFields:
        s.Push({AtomKind::kF, 0, 0});
        break;
      case Kind::kDim:
        s.Push({AtomKind::kWhole, dim, 0});
        break;
      case Kind::kDimIn:
        s.Push({AtomKind::kIn, dim, c.block});
        break;
      case Kind::kDimOut:
        s.Push({AtomKind::kOut, dim, l.block_of(c.dim)});
        break;
    }
  }
  return s;
}

Shape Refine(const Shape& a, const Shape& b) {
  std::array<int64_t, kMaxDims> split;
  split.fill(-1);
  for (int i = 0; i < b.n; ++i) {
    if (b[i].kind == AtomKind::kIn) {
      split[b[i].dim_index()] = b[i].block;
    }
  }
  Shape r;
  for (int i = 0; i < a.n; ++i) {
    const Atom& x = a[i];
    const int64_t s = x.kind == AtomKind::kWhole ? split[x.dim_index()] : -1;
    if (s >= 0) {
      r.Push({AtomKind::kIn, x.dim, s});
      r.Push({AtomKind::kOut, x.dim, s});
    } else {
      r.Push(x);
    }
  }
  return r;
}

bool Equivalent(const Shape& a, const Shape& b) { return Refine(a, b) == Refine(b, a); }

PairShape AnalyzePair(const Shape& a, const Shape& b) {
  PairShape p;
  p.ra = Refine(a, b);
  const Shape rb = Refine(b, a);
  while (p.pf < p.ra.n && p.pf < rb.n && p.ra[p.pf] == rb[p.pf]) {
    ++p.pf;
  }
  int k = 0;
  while (k < p.ra.n && k < rb.n && p.ra[p.ra.n - 1 - k] == rb[rb.n - 1 - k]) {
    ++k;
  }
  p.sb = p.ra.n - k;
  return p;
}

uint64_t AtomBytes(const Atom& x, const Box& bounds, uint64_t field_bytes) {
  const uint64_t e = x.kind == AtomKind::kF ? 0 : static_cast<uint64_t>(bounds.extent(x.dim));
  switch (x.kind) {
    case AtomKind::kF:
      return field_bytes;
    case AtomKind::kWhole:
      return e;
    case AtomKind::kIn:
      return static_cast<uint64_t>(x.block);
    case AtomKind::kOut:
      return CeilDiv(e, static_cast<uint64_t>(x.block));
  }
  return 0;
}

uint64_t Product(const Shape& s, int from, int to, const Box& bounds, uint64_t field_bytes) {
  uint64_t p = 1;
  for (int i = from; i < to; ++i) {
    p = SatMul(p, AtomBytes(s[i], bounds, field_bytes));
  }
  return p;
}

bool HasFields(const Shape& s, int from, int to) {
  for (int i = from; i < to; ++i) {
    if (s[i].kind == AtomKind::kF) {
      return true;
    }
  }
  return false;
}

uint64_t PrefixBytes(const PairShape& p, const Box& bounds, uint64_t field_bytes,
                     uint64_t element_bytes) {
  const uint64_t product = Product(p.ra, 0, p.pf, bounds, field_bytes);
  return HasFields(p.ra, 0, p.pf) ? product : SatMul(product, std::max<uint64_t>(element_bytes, 1));
}

namespace {

// Innermost-first order of F and the dimensions by their innermost
// component (-1 stands for F).
std::vector<int> InnerOrder(const Shape& s) {
  std::vector<int> order;
  for (int i = 0; i < s.n; ++i) {
    const int t = s[i].kind == AtomKind::kF ? -1 : s[i].dim;
    if (std::find(order.begin(), order.end(), t) == order.end()) {
      order.push_back(t);
    }
  }
  return order;
}

// Innermost-first order of the dimensions by their outermost component.
std::vector<int> OuterOrder(const Shape& s) {
  std::vector<int> order;
  for (int i = s.n - 1; i >= 0; --i) {
    if (s[i].kind == AtomKind::kF) {
      continue;
    }
    if (std::find(order.begin(), order.end(), s[i].dim) == order.end()) {
      order.push_back(s[i].dim);
    }
  }
  std::reverse(order.begin(), order.end());
  return order;
}

}  // namespace

std::vector<Shape> CandidateShapes(const Shape& src, const Shape& dst, int dims) {
  std::vector<Shape> c{src};
  if (src == dst) {
    return c;
  }
  c.push_back(dst);
  // Equal up to refinement (e.g. <F,x> and <F,x_in=c,x_out>): no conversion
  // to stage. Both stay: with padding (c not dividing |x|) their sizes differ.
  if (Equivalent(src, dst)) {
    return c;
  }
  std::array<int64_t, kMaxDims> block{};
  for (int d = 0; d < dims; ++d) {
    const int64_t bs = src.SplitBlock(d), bd = dst.SplitBlock(d);
    if (bs > 0 && (bd < 0 || bd == bs)) {
      block[static_cast<size_t>(d)] = bs;
    } else if (bd > 0 && bs < 0) {
      block[static_cast<size_t>(d)] = bd;
    } else {
      block[static_cast<size_t>(d)] = 0;  // variable
    }
  }
  for (const Shape* inner : {&src, &dst}) {
    for (const Shape* outer : {&src, &dst}) {
      Shape b;
      for (int t : InnerOrder(*inner)) {
        if (t < 0) {
          b.Push({AtomKind::kF, 0, 0});
        } else {
          b.Push({AtomKind::kIn, static_cast<int8_t>(t), block[static_cast<size_t>(t)]});
        }
      }
      for (int d : OuterOrder(*outer)) {
        b.Push({AtomKind::kOut, static_cast<int8_t>(d), block[static_cast<size_t>(d)]});
      }
      if (std::none_of(c.begin(), c.end(), [&b](const Shape& s) { return Equivalent(s, b); })) {
        c.push_back(b);
      }
    }
  }
  return c;
}

Result<Layout> Concretize(const Shape& s, const std::array<int64_t, kMaxDims>& blocks, int dims) {
  std::vector<LayoutComponent> comps;
  for (int i = 0; i < s.n; ++i) {
    const Atom& x = s[i];
    switch (x.kind) {
      case AtomKind::kF:
        comps.push_back({Kind::kFields, 0, 0});
        break;
      case AtomKind::kWhole:
        comps.push_back({Kind::kDim, x.dim, 0});
        break;
      case AtomKind::kIn:
        comps.push_back({Kind::kDimIn, x.dim, x.block > 0 ? x.block : blocks[x.dim_index()]});
        break;
      case AtomKind::kOut:
        comps.push_back({Kind::kDimOut, x.dim, 0});
        break;
    }
  }
  return Layout::Make(std::move(comps), dims);
}

}  // namespace full_planner_internal

std::vector<Layout> CandidateLayouts(const Layout& src, const Layout& dst, const Box& bounds,
                                     const std::array<int64_t, kMaxDims>& blocks) {
  using namespace full_planner_internal;
  std::array<int64_t, kMaxDims> clamped{};
  for (int d = 0; d < bounds.dims && d < kMaxDims; ++d) {
    const size_t dd = static_cast<size_t>(d);
    clamped[dd] = std::clamp<int64_t>(blocks[dd], 1, std::max<int64_t>(bounds.extent(d), 1));
  }
  std::vector<Layout> out;
  if (src.dims() != bounds.dims || dst.dims() != bounds.dims) {
    return out;
  }
  for (const Shape& s : CandidateShapes(ShapeOf(src), ShapeOf(dst), bounds.dims)) {
    if (Result<Layout> l = Concretize(s, clamped, bounds.dims); l.ok()) {
      out.push_back(*l);
    }
  }
  return out;
}

}  // namespace isometry
