// ParseDatatype: a recursive-descent parser over core/datatype_text.h's
// grammar. Recursion is bounded by kMaxDatatypeDepth before each descent,
// so hostile text cannot exhaust the stack.
#include "core/datatype_text.h"

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace isometry {

namespace {

// A number as written: "B" marks bytes, otherwise the unit is the context's.
struct Quantity {
  int64_t value = 0;
  bool bytes = false;
};

// One entry of a bracketed list that may be either form: "b", "b@d" (indexed)
// or "b*T@d" (struct).
struct Entry {
  int64_t length = 0;
  bool has_type = false;
  Datatype type = Datatype::Basic(BasicType::kByte);
  bool has_disp = false;
  Quantity disp;
};

bool IsIdentChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

std::string Shown(std::string_view s, size_t pos) {
  if (pos >= s.size()) {
    return "end of text";
  }
  const char c = s[pos];
  if (c >= 0x20 && c < 0x7f) {
    return StrCat("'", c, "'");
  }
  return StrCat("byte 0x", "0123456789abcdef"[(c >> 4) & 0xf], "0123456789abcdef"[c & 0xf]);
}

class Parser {
 public:
  explicit Parser(std::string_view s) : s_(s) {}

  Result<Datatype> Whole() {
    ISO_ASSIGN_OR_RETURN(Datatype t, Type(1));
    Skip();
    if (pos_ != s_.size()) {
      return Error("expected the end of the text");
    }
    return t;
  }

 private:
  // --- Tokens ---
  void Skip() {
    while (pos_ < s_.size() &&
           (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) {
      ++pos_;
    }
  }

  Status ErrorAt(size_t at, std::string_view expected) const {
    std::string got = Shown(s_, at);
    // ToString's abbreviations ("+N more", a "..." tail) do not parse back.
    if (at < s_.size() && s_[at] == '+') {
      got += " (an abbreviated list cannot be parsed)";
    } else if (s_.size() >= 3 && s_.substr(s_.size() - 3) == "...") {
      got += " (the text was cut short)";
    }
    return InvalidArgument("datatype text, column ", at + 1, ": ", expected, ", got ", got);
  }
  Status Error(std::string_view expected) const { return ErrorAt(pos_, expected); }

  bool Peek(char c) {
    Skip();
    return pos_ < s_.size() && s_[pos_] == c;
  }
  bool Accept(char c) {
    if (!Peek(c)) {
      return false;
    }
    ++pos_;
    return true;
  }
  Status Expect(char c) {
    if (!Accept(c)) {
      return Error(StrCat("expected '", c, "'"));
    }
    return OkStatus();
  }
  Status Sep() {
    if (!Accept(',') && !Accept(';')) {
      return Error("expected ',' or ';'");
    }
    return OkStatus();
  }

  std::string_view Ident() {
    Skip();
    const size_t start = pos_;
    while (pos_ < s_.size() && IsIdentChar(s_[pos_])) {
      ++pos_;
    }
    return s_.substr(start, pos_ - start);
  }

  // A keyword such as "sizes=" in ToString's form; optional.
  Status Keyword(std::string_view name) {
    Skip();
    const size_t start = pos_;
    const std::string_view word = Ident();
    if (word.empty()) {
      return OkStatus();
    }
    if (word != name || !Accept('=')) {
      return ErrorAt(start, StrCat("expected '", name, "=' or '['"));
    }
    return OkStatus();
  }

  Result<int64_t> Int() {
    Skip();
    const size_t start = pos_;
    bool negative = false;
    if (pos_ < s_.size() && s_[pos_] == '-') {
      negative = true;
      ++pos_;
    }
    if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') {
      return ErrorAt(start, "expected a number");
    }
    // Accumulated negatively so that INT64_MIN is representable.
    int64_t v = 0;
    constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
    while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') {
      const int digit = s_[pos_] - '0';
      if (v < (kMin + digit) / 10) {
        return InvalidArgument("datatype text, column ", start + 1,
                               ": number does not fit a 64-bit integer");
      }
      v = v * 10 - digit;
      ++pos_;
    }
    if (!negative) {
      if (v == kMin) {
        return InvalidArgument("datatype text, column ", start + 1,
                               ": number does not fit a 64-bit integer");
      }
      v = -v;
    }
    return v;
  }

  Result<Quantity> Quant() {
    Quantity q;
    ISO_ASSIGN_OR_RETURN(q.value, Int());
    if (pos_ < s_.size() && s_[pos_] == 'B') {
      q.bytes = true;
      ++pos_;
    }
    return q;
  }

  // "[a,b,...]" of plain numbers.
  Result<std::vector<int64_t>> Ints() {
    ISO_ASSIGN_OR_RETURN(std::vector<Quantity> qs, Quants());
    std::vector<int64_t> out;
    out.reserve(qs.size());
    for (const Quantity& q : qs) {
      out.push_back(q.value);
    }
    return out;
  }

  Result<std::vector<Quantity>> Quants() {
    ISO_RETURN_IF_ERROR(Expect('['));
    std::vector<Quantity> out;
    if (Accept(']')) {
      return out;
    }
    do {
      ISO_ASSIGN_OR_RETURN(Quantity q, Quant());
      out.push_back(q);
    } while (Accept(','));
    ISO_RETURN_IF_ERROR(Expect(']'));
    return out;
  }

  // "[e,...]" where e is "b", "b@d" or "b*T@d".
  Result<std::vector<Entry>> Entries(int depth) {
    ISO_RETURN_IF_ERROR(Expect('['));
    std::vector<Entry> out;
    if (Accept(']')) {
      return out;
    }
    do {
      Entry e;
      ISO_ASSIGN_OR_RETURN(e.length, Int());
      if (Accept('*')) {
        e.has_type = true;
        ISO_ASSIGN_OR_RETURN(e.type, Type(depth + 1));
      }
      if (Accept('@')) {
        e.has_disp = true;
        ISO_ASSIGN_OR_RETURN(e.disp, Quant());
      }
      out.push_back(std::move(e));
    } while (Accept(','));
    ISO_RETURN_IF_ERROR(Expect(']'));
    return out;
  }

  Result<ArrayOrder> Order() {
    Skip();
    const size_t start = pos_;
    const std::string_view w = Ident();
    if (w == "C" || w == "c") {
      return ArrayOrder::kC;
    }
    if (w == "F" || w == "f" || w == "fortran" || w == "Fortran") {
      return ArrayOrder::kFortran;
    }
    return ErrorAt(start, "expected an array order (c or fortran)");
  }

  // "[block(2),cyclic,none]": distributions and their dargs.
  Status Distribs(std::vector<Distribution>* d, std::vector<int64_t>* dargs) {
    ISO_RETURN_IF_ERROR(Expect('['));
    if (Accept(']')) {
      return OkStatus();
    }
    do {
      Skip();
      const size_t start = pos_;
      const std::string_view w = Ident();
      if (w == "none") {
        d->push_back(Distribution::kNone);
      } else if (w == "block") {
        d->push_back(Distribution::kBlock);
      } else if (w == "cyclic") {
        d->push_back(Distribution::kCyclic);
      } else {
        return ErrorAt(start, "expected a distribution (none, block or cyclic)");
      }
      int64_t darg = kDefaultDarg;
      if (d->back() != Distribution::kNone && Accept('(')) {
        ISO_ASSIGN_OR_RETURN(darg, Int());
        ISO_RETURN_IF_ERROR(Expect(')'));
      }
      dargs->push_back(darg);
    } while (Accept(','));
    return Expect(']');
  }

  // A quantity in elements of `old`; bytes must be a whole number of them.
  Result<int64_t> InElements(const Quantity& q, const Datatype& old, size_t at) const {
    if (!q.bytes) {
      return q.value;
    }
    const int64_t e = old.extent();
    if (e == 0 || (e == -1 && q.value == std::numeric_limits<int64_t>::min()) || q.value % e != 0) {
      if (e == 0 && q.value == 0) {
        return 0;
      }
      return InvalidArgument("datatype text, column ", at + 1, ": ", q.value,
                             "B is not a whole number of elements of extent ", e);
    }
    return q.value / e;
  }

  // The constructor's own error, placed at the type's name.
  Result<Datatype> Built(Result<Datatype> r, size_t at) const {
    if (!r.ok()) {
      return InvalidArgument("datatype text, column ", at + 1, ": ", r.status().message());
    }
    return r;
  }

  // --- Types ---
  Result<Datatype> Type(int depth) {
    Skip();
    const size_t start = pos_;
    if (depth > kMaxDatatypeDepth) {
      return InvalidArgument("datatype text, column ", start + 1, ": nesting deeper than ",
                             kMaxDatatypeDepth, " levels");
    }
    const std::string_view name = Ident();
    for (int b = 0; b < kNumBasicTypes; ++b) {
      if (name == BasicTypeName(static_cast<BasicType>(b))) {
        return Datatype::Basic(static_cast<BasicType>(b));
      }
    }
    if (name.empty()) {
      return ErrorAt(start, "expected a datatype");
    }
    if (!Accept('(')) {
      return ErrorAt(start, StrCat("expected a datatype (unknown name '", name, "')"));
    }
    ISO_ASSIGN_OR_RETURN(Datatype t, Ctor(name, start, depth));
    ISO_RETURN_IF_ERROR(Expect(')'));
    return t;
  }

  Result<Datatype> Ctor(std::string_view name, size_t at, int depth) {
    if (name == "contiguous") {
      ISO_ASSIGN_OR_RETURN(const int64_t n, Int());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
      return Built(Datatype::Contiguous(n, old), at);
    }
    if (name == "vector" || name == "hvector") {
      return Vector(name == "vector", at, depth);
    }
    if (name == "indexed" || name == "hindexed") {
      return Indexed(name == "indexed", at, depth);
    }
    if (name == "indexed_block" || name == "hindexed_block") {
      return IndexedBlock(name == "indexed_block", at, depth);
    }
    if (name == "struct") {
      return Struct(at, depth);
    }
    if (name == "resized") {
      ISO_ASSIGN_OR_RETURN(const Quantity lb, Quant());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(const Quantity extent, Quant());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
      return Built(Datatype::Resized(old, lb.value, extent.value), at);
    }
    if (name == "subarray") {
      return Subarray(at, depth);
    }
    if (name == "darray") {
      return Darray(at, depth);
    }
    return ErrorAt(at, StrCat("expected a datatype (unknown constructor '", name, "')"));
  }

  Result<Datatype> Vector(bool in_elements, size_t at, int depth) {
    ISO_ASSIGN_OR_RETURN(const int64_t count, Int());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_ASSIGN_OR_RETURN(const int64_t blocklength, Int());
    ISO_RETURN_IF_ERROR(Sep());
    Skip();
    const size_t stride_at = pos_;
    ISO_ASSIGN_OR_RETURN(const Quantity stride, Quant());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
    if (!in_elements) {
      return Built(Datatype::Hvector(count, blocklength, stride.value, old), at);
    }
    ISO_ASSIGN_OR_RETURN(const int64_t s, InElements(stride, old, stride_at));
    return Built(Datatype::Vector(count, blocklength, s, old), at);
  }

  // Displacements as the constructor takes them: elements or bytes.
  Result<std::vector<int64_t>> Disps(const std::vector<Quantity>& qs, bool in_elements,
                                     const Datatype& old, size_t at) const {
    std::vector<int64_t> out;
    out.reserve(qs.size());
    for (const Quantity& q : qs) {
      if (in_elements) {
        ISO_ASSIGN_OR_RETURN(const int64_t d, InElements(q, old, at));
        out.push_back(d);
      } else {
        out.push_back(q.value);
      }
    }
    return out;
  }

  Result<Datatype> Indexed(bool in_elements, size_t at, int depth) {
    Skip();
    const size_t list_at = pos_;
    ISO_ASSIGN_OR_RETURN(const std::vector<Entry> entries, Entries(depth));
    ISO_RETURN_IF_ERROR(Sep());
    std::vector<int64_t> lengths;
    std::vector<Quantity> disps;
    const bool positional = Peek('[');
    for (const Entry& e : entries) {
      if (e.has_type || e.has_disp == positional) {
        return ErrorAt(list_at, positional ? "expected blocklengths like [1,2]"
                                           : "expected entries like [length@displacement,...]");
      }
      lengths.push_back(e.length);
      disps.push_back(e.disp);
    }
    if (positional) {
      ISO_ASSIGN_OR_RETURN(disps, Quants());
      ISO_RETURN_IF_ERROR(Sep());
    }
    ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> d, Disps(disps, in_elements, old, list_at));
    return Built(
        in_elements ? Datatype::Indexed(lengths, d, old) : Datatype::Hindexed(lengths, d, old), at);
  }

  Result<Datatype> IndexedBlock(bool in_elements, size_t at, int depth) {
    ISO_ASSIGN_OR_RETURN(const int64_t blocklength, Int());
    ISO_RETURN_IF_ERROR(Sep());
    Skip();
    const size_t list_at = pos_;
    ISO_ASSIGN_OR_RETURN(const std::vector<Quantity> disps, Quants());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> d, Disps(disps, in_elements, old, list_at));
    return Built(in_elements ? Datatype::IndexedBlock(blocklength, d, old)
                             : Datatype::HindexedBlock(blocklength, d, old),
                 at);
  }

  Result<Datatype> Struct(size_t at, int depth) {
    Skip();
    const size_t list_at = pos_;
    ISO_ASSIGN_OR_RETURN(const std::vector<Entry> entries, Entries(depth));
    std::vector<int64_t> lengths;
    std::vector<int64_t> disps;
    std::vector<Datatype> types;
    const bool positional = !Peek(')');
    for (const Entry& e : entries) {
      if (positional ? (e.has_type || e.has_disp) : !(e.has_type && e.has_disp)) {
        return ErrorAt(list_at, positional ? "expected blocklengths like [1,2]"
                                           : "expected entries like [length*type@displacement]");
      }
      lengths.push_back(e.length);
      disps.push_back(e.disp.value);
      types.push_back(e.type);
    }
    if (positional) {
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(disps, Ints());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_RETURN_IF_ERROR(Expect('['));
      types.clear();
      if (!Accept(']')) {
        do {
          ISO_ASSIGN_OR_RETURN(Datatype t, Type(depth + 1));
          types.push_back(std::move(t));
        } while (Accept(','));
        ISO_RETURN_IF_ERROR(Expect(']'));
      }
      if (types.size() != lengths.size()) {
        return InvalidArgument("datatype text, column ", at + 1, ": struct: ", lengths.size(),
                               " blocklengths but ", types.size(), " types");
      }
    }
    return Built(Datatype::Struct(lengths, disps, types), at);
  }

  Result<Datatype> Subarray(size_t at, int depth) {
    const bool positional = Peek('[');
    ArrayOrder order = ArrayOrder::kC;
    if (!positional) {
      ISO_ASSIGN_OR_RETURN(order, Order());
      ISO_RETURN_IF_ERROR(Sep());
    }
    ISO_RETURN_IF_ERROR(Keyword("sizes"));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, Ints());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_RETURN_IF_ERROR(Keyword("subsizes"));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> subsizes, Ints());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_RETURN_IF_ERROR(Keyword("starts"));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> starts, Ints());
    ISO_RETURN_IF_ERROR(Sep());
    if (positional) {
      ISO_ASSIGN_OR_RETURN(order, Order());
      ISO_RETURN_IF_ERROR(Sep());
    }
    ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
    return Built(Datatype::Subarray(sizes, subsizes, starts, order, old), at);
  }

  Result<Datatype> Darray(size_t at, int depth) {
    int64_t nprocs = 0;
    int64_t rank = 0;
    ArrayOrder order = ArrayOrder::kC;
    Skip();
    const size_t rank_at = pos_;
    const bool positional = Ident() != "rank";
    if (positional) {
      pos_ = rank_at;
      ISO_ASSIGN_OR_RETURN(nprocs, Int());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(rank, Int());
    } else {
      ISO_ASSIGN_OR_RETURN(rank, Int());
      ISO_RETURN_IF_ERROR(Expect('/'));
      ISO_ASSIGN_OR_RETURN(nprocs, Int());
      ISO_RETURN_IF_ERROR(Sep());
      ISO_ASSIGN_OR_RETURN(order, Order());
    }
    ISO_RETURN_IF_ERROR(Sep());
    ISO_RETURN_IF_ERROR(Keyword("gsizes"));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> gsizes, Ints());
    ISO_RETURN_IF_ERROR(Sep());
    ISO_RETURN_IF_ERROR(Keyword("distribs"));
    std::vector<Distribution> distribs;
    std::vector<int64_t> dargs;
    ISO_RETURN_IF_ERROR(Distribs(&distribs, &dargs));
    ISO_RETURN_IF_ERROR(Sep());
    ISO_RETURN_IF_ERROR(Keyword("psizes"));
    ISO_ASSIGN_OR_RETURN(const std::vector<int64_t> psizes, Ints());
    ISO_RETURN_IF_ERROR(Sep());
    if (positional) {
      ISO_ASSIGN_OR_RETURN(order, Order());
      ISO_RETURN_IF_ERROR(Sep());
    }
    ISO_ASSIGN_OR_RETURN(const Datatype old, Type(depth + 1));
    return Built(Datatype::Darray(nprocs, rank, gsizes, distribs, dargs, psizes, order, old), at);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace

Result<Datatype> ParseDatatype(std::string_view text) {
  if (text.size() > kMaxDatatypeTextBytes) {
    return InvalidArgument("datatype text of ", text.size(), " bytes exceeds the limit of ",
                           kMaxDatatypeTextBytes);
  }
  return Parser(text).Whole();
}

}  // namespace isometry
