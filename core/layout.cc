#include "core/layout.h"

#include "core/strings.h"

namespace isometry {

namespace {

using Kind = LayoutComponent::Kind;

constexpr const char* kDimNames[kMaxDims] = {"x", "y", "z", "w"};

std::string DimName(int d) {
  return d >= 0 && d < kMaxDims ? kDimNames[d] : StrCat("d", d);
}

// Returns the dimension named by `name` (x/y/z/w or d0..d3), or -1.
int ParseDimName(std::string_view name) {
  for (int d = 0; d < kMaxDims; ++d) {
    if (name == kDimNames[d] || name == StrCat("d", d)) return d;
  }
  return -1;
}

std::string ComponentText(const LayoutComponent& c) {
  switch (c.kind) {
    case Kind::kFields: return "F";
    case Kind::kDim: return DimName(c.dim);
    case Kind::kDimIn: return StrCat(DimName(c.dim), "_in=", c.block);
    case Kind::kDimOut: return StrCat(DimName(c.dim), "_out");
  }
  return "?";
}

}  // namespace

Result<Layout> Layout::Make(std::vector<LayoutComponent> components, int dims) {
  if (dims < 1 || dims > kMaxDims) {
    return InvalidArgument("layout: ", dims, " dimensions; between 1 and ", kMaxDims,
                           " are supported");
  }
  Layout l;
  l.dims_ = dims;
  int fields_seen = 0;
  std::array<int, kMaxDims> whole{}, in{}, out{};
  for (size_t i = 0; i < components.size(); ++i) {
    const LayoutComponent& c = components[i];
    if (c.kind == Kind::kFields) {
      ++fields_seen;
      l.fields_pos_ = i;
      continue;
    }
    if (c.dim < 0 || c.dim >= dims) {
      return InvalidArgument("layout: component ", i, " names dimension ", c.dim,
                             " but the index space has ", dims, " dimension(s)");
    }
    if (c.kind == Kind::kDim) ++whole[c.dim];
    if (c.kind == Kind::kDimIn) {
      ++in[c.dim];
      if (c.block < 1) {
        return InvalidArgument("layout: ", DimName(c.dim), "_in has blocking factor ", c.block,
                               "; it must be at least 1");
      }
    }
    if (c.kind == Kind::kDimOut) ++out[c.dim];
  }
  l.components_ = std::move(components);
  const std::string text = l.ToString();
  if (fields_seen != 1) {
    return InvalidArgument("layout '", text, "': the field space F must appear exactly once, ",
                           "found ", fields_seen, " times");
  }
  for (int d = 0; d < dims; ++d) {
    const bool as_whole = whole[d] == 1 && in[d] == 0 && out[d] == 0;
    const bool as_pair = whole[d] == 0 && in[d] == 1 && out[d] == 1;
    if (!as_whole && !as_pair) {
      return InvalidArgument("layout '", text, "': dimension ", DimName(d),
                             " must appear once whole or once as ", DimName(d), "_in=c plus ",
                             DimName(d), "_out (found ", whole[d], " whole, ", in[d], " in, ",
                             out[d], " out)");
    }
  }
  return l;
}

Result<Layout> Layout::Parse(std::string_view text, int dims) {
  std::vector<LayoutComponent> comps;
  for (std::string_view raw : SplitOn(text, ',')) {
    std::string_view tok = TrimAscii(raw);
    if (tok.empty()) return InvalidArgument("layout '", text, "': empty component");
    if (tok == "F") {
      comps.push_back({Kind::kFields, 0, 0});
      continue;
    }
    const size_t eq = tok.find('=');
    std::string_view head = tok.substr(0, eq);
    LayoutComponent c;
    auto consume_suffix = [&head](std::string_view suffix) {
      if (head.size() < suffix.size() || head.substr(head.size() - suffix.size()) != suffix) {
        return false;
      }
      head.remove_suffix(suffix.size());
      return true;
    };
    if (consume_suffix("_in")) {
      c.kind = Kind::kDimIn;
      std::optional<int64_t> block;
      if (eq != std::string_view::npos) block = ParseNumber<int64_t>(tok.substr(eq + 1));
      if (block) c.block = *block;
      if (!block) {
        return InvalidArgument("layout '", text, "': '", tok, "' needs a blocking factor, as in ",
                               head, "_in=4");
      }
    } else if (consume_suffix("_out")) {
      c.kind = Kind::kDimOut;
    } else {
      c.kind = Kind::kDim;
    }
    if (c.kind != Kind::kDimIn && eq != std::string_view::npos) {
      return InvalidArgument("layout '", text, "': only x_in takes '=c', not '", tok, "'");
    }
    c.dim = ParseDimName(head);
    if (c.dim < 0) {
      return InvalidArgument("layout '", text, "': unknown component '", tok,
                             "' (use F, x, y, z, w, x_in=c, x_out)");
    }
    comps.push_back(c);
  }
  return Make(std::move(comps), dims);
}

Layout Layout::RowMajor(int dims) {
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = dims - 1; d >= 0; --d) c.push_back({Kind::kDim, d, 0});
  return *Make(std::move(c), dims);
}

Layout Layout::ColumnMajor(int dims) {
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = 0; d < dims; ++d) c.push_back({Kind::kDim, d, 0});
  return *Make(std::move(c), dims);
}

Layout Layout::Soa(int dims) {
  std::vector<LayoutComponent> c;
  for (int d = dims - 1; d >= 0; --d) c.push_back({Kind::kDim, d, 0});
  c.push_back({Kind::kFields, 0, 0});
  return *Make(std::move(c), dims);
}

Result<Layout> Layout::Hybrid(int dims, int64_t block) {
  if (dims < 1 || dims > kMaxDims) return InvalidArgument("hybrid layout: bad dims ", dims);
  const int fast = dims - 1;
  std::vector<LayoutComponent> c{{Kind::kDimIn, fast, block},
                                 {Kind::kFields, 0, 0},
                                 {Kind::kDimOut, fast, 0}};
  for (int d = dims - 2; d >= 0; --d) c.push_back({Kind::kDim, d, 0});
  return Make(std::move(c), dims);
}

Result<Layout> Layout::Blocked(std::vector<int64_t> blocks) {
  const int dims = static_cast<int>(blocks.size());
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = dims - 1; d >= 0; --d) c.push_back({Kind::kDimIn, d, blocks[d]});
  for (int d = dims - 1; d >= 0; --d) c.push_back({Kind::kDimOut, d, 0});
  return Make(std::move(c), dims);
}

int64_t Layout::block_of(int d) const {
  for (const LayoutComponent& c : components_) {
    if (c.kind == Kind::kDimIn && c.dim == d) return c.block;
  }
  return 0;
}

std::string Layout::ToString() const {
  std::string s;
  for (size_t i = 0; i < components_.size(); ++i) {
    StrAppend(&s, i ? "," : "", ComponentText(components_[i]));
  }
  return s;
}

uint64_t ComponentSize(const Layout& l, size_t index, const Box& bounds, uint64_t field_bytes) {
  const LayoutComponent& c = l.components()[index];
  const uint64_t extent = static_cast<uint64_t>(bounds.extent(c.dim));
  switch (c.kind) {
    case Kind::kFields: return field_bytes;
    case Kind::kDim: return extent;
    case Kind::kDimIn: return static_cast<uint64_t>(c.block);
    case Kind::kDimOut: {
      const uint64_t b = static_cast<uint64_t>(l.block_of(c.dim));
      return (extent + b - 1) / b;
    }
  }
  return 0;
}

namespace {

// Component sizes of `l`, innermost first.
std::vector<uint64_t> Sizes(const Layout& l, const Box& bounds, uint64_t field_bytes) {
  std::vector<uint64_t> s;
  for (size_t i = 0; i < l.components().size(); ++i) {
    s.push_back(ComponentSize(l, i, bounds, field_bytes));
  }
  return s;
}

uint64_t Product(const std::vector<uint64_t>& v, size_t from, size_t to) {
  uint64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= v[i];
  return p;
}

}  // namespace

uint64_t Total(const Layout& l, const Box& bounds, uint64_t field_bytes) {
  const auto s = Sizes(l, bounds, field_bytes);
  return Product(s, 0, s.size());
}

uint64_t Prefix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const auto& ca = a.components();
  const auto& cb = b.components();
  size_t n = 0;
  while (n < ca.size() && n < cb.size() && ca[n] == cb[n]) ++n;
  return Product(Sizes(a, bounds, field_bytes), 0, n);
}

uint64_t Suffix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const auto& ca = a.components();
  const auto& cb = b.components();
  size_t n = 0;
  while (n < ca.size() && n < cb.size() && ca[ca.size() - 1 - n] == cb[cb.size() - 1 - n]) ++n;
  const auto s = Sizes(a, bounds, field_bytes);
  return Product(s, s.size() - n, s.size());
}

uint64_t SuffixBar(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const uint64_t suffix = Suffix(a, b, bounds, field_bytes);
  return suffix == 0 ? 0 : Total(a, bounds, field_bytes) / suffix;
}

}  // namespace isometry
