// Counting and the stable serialization/hash of canonical forms (the parts
// of layout/datatype_form.h that need no construction machinery).
#include <algorithm>
#include <string>

#include "layout/datatype_form.h"

namespace isometry {

uint64_t FormPiece::iterations() const {
  uint64_t n = 1;
  for (const FormLoop& l : loops) {
    n = __builtin_mul_overflow(n, static_cast<uint64_t>(l.count), &n) ? UINT64_MAX : n;
  }
  return n;
}

uint64_t FormPiece::runs() const {
  uint64_t per = body.empty() ? 1 : 0;
  for (const FormPiece& b : body) {
    per = __builtin_add_overflow(per, b.runs(), &per) ? UINT64_MAX : per;
  }
  uint64_t n = 0;
  return __builtin_mul_overflow(iterations(), per, &n) ? UINT64_MAX : n;
}

uint64_t FormPiece::bytes() const {
  uint64_t per = body.empty() ? static_cast<uint64_t>(run) : 0;
  for (const FormPiece& b : body) {
    per = __builtin_add_overflow(per, b.bytes(), &per) ? UINT64_MAX : per;
  }
  uint64_t n = 0;
  return __builtin_mul_overflow(iterations(), per, &n) ? UINT64_MAX : n;
}

int64_t FormPiece::lowest() const {
  int64_t lo = offset;
  for (const FormLoop& l : loops) {
    lo += std::min<int64_t>(0, (l.count - 1) * l.stride);
  }
  int64_t body_lo = body.empty() ? 0 : body[0].lowest();
  for (const FormPiece& b : body) {
    body_lo = std::min(body_lo, b.lowest());
  }
  return lo + body_lo;
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

std::string SerializeForm(const CanonicalForm& form) {
  std::string out = "ISOFORM1";
  auto put = [&](int64_t v) {
    const auto u = static_cast<uint64_t>(v);
    for (int i = 0; i < 8; ++i) {
      out.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
    }
  };
  auto piece = [&](const FormPiece& p, auto& self) -> void {
    put(p.offset);
    put(p.run);
    put(static_cast<int64_t>(p.loops.size()));
    for (const FormLoop& l : p.loops) {
      put(l.count);
      put(l.stride);
    }
    put(static_cast<int64_t>(p.body.size()));
    for (const FormPiece& b : p.body) {
      self(b, self);
    }
  };
  put(static_cast<int64_t>(form.pieces.size()));
  for (const FormPiece& p : form.pieces) {
    piece(p, piece);
  }
  return out;
}

uint64_t FormHash(const CanonicalForm& form) { return SerializedFormHash(SerializeForm(form)); }

uint64_t SerializedFormHash(std::string_view serialized) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (const char c : serialized) {
    h ^= static_cast<uint8_t>(c);
    h *= 0x100000001b3ull;
  }
  return h;
}

namespace {

void AppendPieceText(const FormPiece& p, std::string& out) {
  if (p.body.empty()) {
    out += std::to_string(p.run);
  } else {
    out += '(';
    for (size_t i = 0; i < p.body.size(); ++i) {
      if (i) out += ", ";
      AppendPieceText(p.body[i], out);
    }
    out += ')';
  }
  out += '@' + std::to_string(p.offset);
  for (const FormLoop& l : p.loops) {
    out += " x" + std::to_string(l.count) + '/' + std::to_string(l.stride);
  }
}

}  // namespace

std::string FormText(const CanonicalForm& form, size_t max_pieces) {
  if (form.pieces.empty()) return "(empty)";
  std::string out;
  const size_t shown = std::min(form.pieces.size(), max_pieces);
  for (size_t i = 0; i < shown; ++i) {
    if (i) out += "; ";
    AppendPieceText(form.pieces[i], out);
  }
  if (shown < form.pieces.size()) {
    out += "; ... (" + std::to_string(form.pieces.size() - shown) + " more)";
  }
  return out;
}

}  // namespace isometry
