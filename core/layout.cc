#include "core/layout.h"

#include <algorithm>
#include <array>
#include <optional>
#include <utility>

#include "core/checked.h"
#include "core/strings.h"

namespace isometry {

namespace {

using Kind = LayoutComponent::Kind;

constexpr const char* kDimNames[kMaxDims] = {"x", "y", "z", "w"};

std::string DimName(int d) { return d >= 0 && d < kMaxDims ? kDimNames[d] : StrCat("d", d); }

// "x, y" for the first `dims` dimensions.
std::string DimNames(int dims) {
  std::string s;
  for (int d = 0; d < dims && d < kMaxDims; ++d) {
    StrAppend(&s, d ? ", " : "", DimName(d));
  }
  return s;
}

// "x, z" for the dimensions marked in `which`.
std::string DimNames(const std::array<bool, kMaxDims>& which) {
  std::string s;
  for (int d = 0; d < kMaxDims; ++d) {
    if (which[d]) {
      StrAppend(&s, s.empty() ? "" : ", ", DimName(d));
    }
  }
  return s;
}

// Returns the dimension named by `name` (x/y/z/w or d0..d3), or -1.
int ParseDimName(std::string_view name) {
  for (int d = 0; d < kMaxDims; ++d) {
    if (name == kDimNames[d] || name == StrCat("d", d)) {
      return d;
    }
  }
  return -1;
}

// A component name without its "=c": x, x_in, x_out (or d0, d0_in, ...).
// The dimension may lie beyond the layout's; Parse says so.
std::optional<LayoutComponent> ParseComponentName(std::string_view name) {
  LayoutComponent c;
  c.kind = Kind::kDim;
  for (const auto& [suffix, kind] : {std::pair{std::string_view("_in"), Kind::kDimIn},
                                     std::pair{std::string_view("_out"), Kind::kDimOut}}) {
    if (name.size() > suffix.size() && name.substr(name.size() - suffix.size()) == suffix) {
      name.remove_suffix(suffix.size());
      c.kind = kind;
      break;
    }
  }
  c.dim = ParseDimName(name);
  if (c.dim < 0) {
    return std::nullopt;
  }
  return c;
}

// `name` as a user probably meant it: lower case, '-' for '_'.
std::string Normalized(std::string_view name) {
  std::string s = AsciiLower(name);
  for (char& ch : s) {
    ch = ch == '-' ? '_' : ch;
  }
  return s;
}

// "F, x, y, x_in=c, x_out, y_in=c, y_out" for a 2-d layout.
std::string ComponentNames(int dims) {
  dims = std::clamp(dims, 1, kMaxDims);
  std::string s = "F";
  for (int d = 0; d < dims; ++d) {
    StrAppend(&s, ", ", DimName(d));
  }
  for (int d = 0; d < dims; ++d) {
    StrAppend(&s, ", ", DimName(d), "_in=c, ", DimName(d), "_out");
  }
  return s;
}

// The largest blocking factor: a block of more points than this cannot be
// stored (InstanceShape::Validate bounds storage by 2^62 bytes).
constexpr int64_t kMaxBlockingFactor = int64_t{1} << 62;

// The c of `tok` (x_in=c): a positive decimal integer, written plainly.
// Each other form gets a message that says what is wrong with it.
Result<int64_t> ParseBlockingFactor(std::string_view value, std::string_view tok,
                                    std::string_view name, std::string_view text) {
  const auto bad = [&](auto... why) {
    return InvalidArgument("layout '", text, "': '", tok, "': ", why...);
  };
  if (TrimAscii(value) != value) {
    return bad("no spaces around '=' (as in ", name, "=4)");
  }
  if (value.front() == '+') {
    return bad("the blocking factor takes no sign (as in ", name, "=", value.substr(1), ")");
  }
  if (value.front() == '-') {
    return bad("the blocking factor must be at least 1");
  }
  if (value.size() > 1 && value[0] == '0' && (value[1] == 'x' || value[1] == 'X')) {
    return bad("hexadecimal is not accepted; write the blocking factor in decimal");
  }
  const bool digits = value.find_first_not_of("0123456789") == std::string_view::npos;
  if (!digits) {
    return bad("'", value, "' is not a number; the blocking factor is a decimal integer, as in ",
               name, "=4");
  }
  const std::optional<int64_t> v = ParseNumber<int64_t>(value);  // fails past 2^63 - 1
  if (!v || *v > kMaxBlockingFactor) {
    return bad("the blocking factor is too large (at most 2^62 = ", kMaxBlockingFactor, ")");
  }
  return *v;
}

std::string ComponentText(const LayoutComponent& c) {
  switch (c.kind) {
    case Kind::kFields:
      return "F";
    case Kind::kDim:
      return DimName(c.dim);
    case Kind::kDimIn:
      return StrCat(DimName(c.dim), "_in=", c.block);
    case Kind::kDimOut:
      return StrCat(DimName(c.dim), "_out");
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
  std::array<bool, kMaxDims> named{};
  for (size_t i = 0; i < components.size(); ++i) {
    const LayoutComponent& c = components[i];
    if (c.kind == Kind::kFields) {
      ++fields_seen;
      l.fields_pos_ = i;
      continue;
    }
    if (c.dim < 0 || c.dim >= kMaxDims) {
      return InvalidArgument("layout: component ", i, " names dimension ", c.dim,
                             "; dimensions are numbered 0 to ", kMaxDims - 1);
    }
    named[c.dim] = true;
    if (c.dim >= dims) {
      continue;  // reported below, with the whole layout
    }
    if (c.kind == Kind::kDim) {
      ++whole[c.dim];
    }
    if (c.kind == Kind::kDimIn) {
      ++in[c.dim];
      if (c.block < 1) {
        return InvalidArgument("layout: ", DimName(c.dim), "_in has blocking factor ", c.block,
                               "; it must be at least 1");
      }
    }
    if (c.kind == Kind::kDimOut) {
      ++out[c.dim];
    }
  }
  l.components_ = std::make_shared<const std::vector<LayoutComponent>>(std::move(components));
  const std::string text = l.ToString();
  // A layout for another number of dimensions: say so with both counts
  // rather than which component is out of place.
  int named_count = 0;
  std::string extra, missing;
  for (int d = 0; d < kMaxDims; ++d) {
    named_count += named[d];
    if (named[d] && d >= dims) {
      StrAppend(&extra, extra.empty() ? "" : ", ", DimName(d));
    }
    if (!named[d] && d < dims) {
      StrAppend(&missing, missing.empty() ? "" : ", ", DimName(d));
    }
  }
  if (!extra.empty()) {
    return InvalidArgument("layout '", text, "' names ", named_count, " dimension(s) (",
                           DimNames(named), ") but the index space has ", dims, " (",
                           DimNames(dims), "): ", extra, " is not one of them");
  }
  if (named_count != dims) {
    return InvalidArgument("layout '", text, "' names ", named_count, " dimension(s) but the ",
                           "index space has ", dims, " (", DimNames(dims), "): dimension ", missing,
                           " is missing");
  }
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
    if (tok.empty()) {
      return InvalidArgument("layout '", text, "': empty component");
    }
    const size_t eq = tok.find('=');
    const std::string_view name = tok.substr(0, eq);
    const bool has_value = eq != std::string_view::npos;
    if (has_value && TrimAscii(name) != name) {
      return InvalidArgument("layout '", text, "': '", tok, "': no spaces around '=' (as in ",
                             TrimAscii(name), "=4)");
    }
    if (name == "F") {
      if (has_value) {
        return InvalidArgument("layout '", text, "': only x_in (y_in, ...) takes '=c', not '", tok,
                               "'");
      }
      comps.push_back({Kind::kFields, 0, 0});
      continue;
    }
    std::optional<LayoutComponent> c = ParseComponentName(name);
    if (!c) {
      // x_IN=4, x-in=4: say what was probably meant.
      const std::string fixed = Normalized(name);
      const std::string hint = fixed != name && ParseComponentName(fixed)
                                   ? StrCat(" (did you mean '", fixed, tok.substr(name.size()),
                                            "'? component names are lower case, with '_')")
                                   : "";
      return InvalidArgument("layout '", text, "': unknown component '", tok, "'", hint,
                             "; the components of a ", dims, "-d layout are ",
                             ComponentNames(dims));
    }
    if (c->kind != Kind::kDimIn) {
      if (has_value) {
        return InvalidArgument("layout '", text, "': only x_in (y_in, ...) takes '=c', not '", tok,
                               "'");
      }
    } else {
      if (!has_value || eq + 1 == tok.size()) {
        return InvalidArgument("layout '", text, "': '", tok, "' needs a blocking factor, as in ",
                               name, "=4");
      }
      ISO_ASSIGN_OR_RETURN(c->block, ParseBlockingFactor(tok.substr(eq + 1), tok, name, text));
    }
    comps.push_back(*c);
  }
  return Make(std::move(comps), dims);
}

Layout Layout::RowMajor(int dims) {
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = dims - 1; d >= 0; --d) {
    c.push_back({Kind::kDim, d, 0});
  }
  return *Make(std::move(c), dims);
}

Layout Layout::ColumnMajor(int dims) {
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = 0; d < dims; ++d) {
    c.push_back({Kind::kDim, d, 0});
  }
  return *Make(std::move(c), dims);
}

Layout Layout::Soa(int dims) {
  std::vector<LayoutComponent> c;
  for (int d = dims - 1; d >= 0; --d) {
    c.push_back({Kind::kDim, d, 0});
  }
  c.push_back({Kind::kFields, 0, 0});
  return *Make(std::move(c), dims);
}

Result<Layout> Layout::Hybrid(int dims, int64_t block) {
  if (dims < 1 || dims > kMaxDims) {
    return InvalidArgument("hybrid layout: bad dims ", dims);
  }
  const int fast = dims - 1;
  std::vector<LayoutComponent> c{
      {Kind::kDimIn, fast, block}, {Kind::kFields, 0, 0}, {Kind::kDimOut, fast, 0}};
  for (int d = dims - 2; d >= 0; --d) {
    c.push_back({Kind::kDim, d, 0});
  }
  return Make(std::move(c), dims);
}

Result<Layout> Layout::Blocked(std::vector<int64_t> blocks) {
  const int dims = static_cast<int>(blocks.size());
  std::vector<LayoutComponent> c{{Kind::kFields, 0, 0}};
  for (int d = dims - 1; d >= 0; --d) {
    c.push_back({Kind::kDimIn, d, blocks[d]});
  }
  for (int d = dims - 1; d >= 0; --d) {
    c.push_back({Kind::kDimOut, d, 0});
  }
  return Make(std::move(c), dims);
}

int64_t Layout::block_of(int d) const {
  for (const LayoutComponent& c : components()) {
    if (c.kind == Kind::kDimIn && c.dim == d) {
      return c.block;
    }
  }
  return 0;
}

std::string Layout::ToString() const {
  std::string s;
  for (size_t i = 0; i < components().size(); ++i) {
    StrAppend(&s, i ? "," : "", ComponentText(components()[i]));
  }
  return s;
}

uint64_t ComponentSize(const Layout& l, size_t index, const Box& bounds, uint64_t field_bytes) {
  const LayoutComponent& c = l.components()[index];
  const uint64_t extent = static_cast<uint64_t>(bounds.extent(c.dim));
  switch (c.kind) {
    case Kind::kFields:
      return field_bytes;
    case Kind::kDim:
      return extent;
    case Kind::kDimIn:
      return static_cast<uint64_t>(c.block);
    case Kind::kDimOut: {
      // ceil(extent / b) without forming extent + b - 1, which wraps for
      // blocks near 2^64 on a layout built by Make rather than Parse.
      const uint64_t b = static_cast<uint64_t>(l.block_of(c.dim));
      return extent == 0 ? 0 : (extent - 1) / b + 1;
    }
  }
  return 0;
}

namespace {

// The product of the sizes of `l`'s components [from, to), innermost
// first, computed as it goes: every copy asks it of both ends, so nothing
// is allocated. Saturates at UINT64_MAX instead of wrapping: an
// intermediate layout a client names (a forced hop's x_in=2^62) is bounded
// by no instance, and a wrapped size could pass as a small buffer. A zero
// factor still gives 0.
uint64_t Product(const Layout& l, const Box& bounds, uint64_t field_bytes, size_t from, size_t to) {
  uint64_t p = 1;
  bool saturated = false;
  for (size_t i = from; i < to; ++i) {
    const uint64_t size = ComponentSize(l, i, bounds, field_bytes);
    if (size == 0) {
      return 0;
    }
    const std::optional<uint64_t> next = CheckedMul(p, size);
    saturated |= !next;
    if (next) {
      p = *next;
    }
  }
  return saturated ? UINT64_MAX : p;
}

}  // namespace

uint64_t Total(const Layout& l, const Box& bounds, uint64_t field_bytes) {
  return Product(l, bounds, field_bytes, 0, l.components().size());
}

uint64_t Prefix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const auto& ca = a.components();
  const auto& cb = b.components();
  size_t n = 0;
  while (n < ca.size() && n < cb.size() && ca[n] == cb[n]) {
    ++n;
  }
  return Product(a, bounds, field_bytes, 0, n);
}

uint64_t Suffix(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const auto& ca = a.components();
  const auto& cb = b.components();
  size_t n = 0;
  while (n < ca.size() && n < cb.size() && ca[ca.size() - 1 - n] == cb[cb.size() - 1 - n]) {
    ++n;
  }
  return Product(a, bounds, field_bytes, ca.size() - n, ca.size());
}

uint64_t SuffixBar(const Layout& a, const Layout& b, const Box& bounds, uint64_t field_bytes) {
  const uint64_t suffix = Suffix(a, b, bounds, field_bytes);
  return suffix == 0 ? 0 : Total(a, bounds, field_bytes) / suffix;
}

}  // namespace isometry
