// The inverse of SerializeForm, for forms that arrive from outside this
// process (a peer's StartHalf): every field is checked, so a form that
// parses is one RestrictForm and CompileFormCopy can take without
// overflowing, whatever the bytes were.
#include <string_view>

#include "core/strings.h"
#include "layout/datatype_form.h"

namespace isometry {
namespace {

// Offsets, strides and the reach of every piece stay far inside int64, so
// no later sum of them (in 64 bits) can wrap.
constexpr __int128 kMaxReach = static_cast<__int128>(1) << 62;
constexpr int64_t kMaxCount = int64_t{1} << 40;

class Reader {
 public:
  explicit Reader(std::string_view bytes) : in_(bytes) {}

  Result<int64_t> Next(std::string_view what) {
    if (in_.size() < 8) return InvalidArgument("form: truncated at ", what);
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(8);
    return static_cast<int64_t>(u);
  }
  bool done() const { return in_.empty(); }

 private:
  std::string_view in_;
};

Status CheckReach(const FormPiece& p, __int128 base) {
  __int128 lo = base + p.offset, hi = lo;
  for (const FormLoop& l : p.loops) {
    const __int128 d = static_cast<__int128>(l.count - 1) * l.stride;
    (d < 0 ? lo : hi) += d;
  }
  if (lo <= -kMaxReach || hi + p.run >= kMaxReach) {
    return InvalidArgument("form: a piece reaches past 2^62 bytes from its origin");
  }
  for (const FormPiece& b : p.body) {
    ISO_RETURN_IF_ERROR(CheckReach(b, lo));
    ISO_RETURN_IF_ERROR(CheckReach(b, hi));
  }
  return OkStatus();
}

Result<FormPiece> ReadPiece(Reader& r, bool in_body) {
  FormPiece p;
  ISO_ASSIGN_OR_RETURN(p.offset, r.Next("offset"));
  ISO_ASSIGN_OR_RETURN(p.run, r.Next("run"));
  ISO_ASSIGN_OR_RETURN(const int64_t loops, r.Next("loop count"));
  if (loops < 0 || loops > kMaxFormLoops) {
    return InvalidArgument("form: ", loops, " loops in a piece; at most ", kMaxFormLoops);
  }
  for (int64_t i = 0; i < loops; ++i) {
    FormLoop l;
    ISO_ASSIGN_OR_RETURN(l.count, r.Next("loop"));
    ISO_ASSIGN_OR_RETURN(l.stride, r.Next("stride"));
    if (l.count < 2 || l.count > kMaxCount) {
      return InvalidArgument("form: a loop of ", l.count, " iterations (2 to 2^40)");
    }
    if (l.stride <= -kMaxCount * 4096 || l.stride >= kMaxCount * 4096) {
      return InvalidArgument("form: a stride of ", l.stride, " bytes");
    }
    p.loops.push_back(l);
  }
  ISO_ASSIGN_OR_RETURN(const int64_t body, r.Next("body size"));
  if (body < 0 || static_cast<uint64_t>(body) > kMaxFormPeriod || (in_body && body != 0)) {
    return InvalidArgument("form: a group of ", body, " pieces (at most ", kMaxFormPeriod,
                           ", none nested)");
  }
  for (int64_t i = 0; i < body; ++i) {
    ISO_ASSIGN_OR_RETURN(FormPiece b, ReadPiece(r, /*in_body=*/true));
    p.body.push_back(std::move(b));
  }
  const bool group = !p.body.empty();
  if (group ? p.run != 0 || p.body[0].offset != 0 : p.run <= 0 || p.run >= kMaxReach) {
    return InvalidArgument("form: a piece with run ", p.run,
                           group ? " heading a group (0, first body offset 0)" : " (> 0)");
  }
  return p;
}

}  // namespace

Result<CanonicalForm> ParseForm(std::string_view bytes) {
  if (bytes.size() > kMaxSerializedForm) {
    return InvalidArgument("form: ", bytes.size(), " bytes; at most ", kMaxSerializedForm);
  }
  if (bytes.substr(0, 8) != "ISOFORM1") return InvalidArgument("form: no ISOFORM1 magic");
  Reader r(bytes.substr(8));
  ISO_ASSIGN_OR_RETURN(const int64_t n, r.Next("piece count"));
  if (n < 1 || static_cast<uint64_t>(n) > kMaxFormPieces) {
    return InvalidArgument("form: ", n, " pieces (1 to ", kMaxFormPieces, ")");
  }
  CanonicalForm form;
  // Each piece takes at least 32 bytes: a count past that is a lie, not
  // a reason to reserve.
  form.pieces.reserve(std::min<uint64_t>(static_cast<uint64_t>(n), bytes.size() / 32));
  __int128 total = 0;
  for (int64_t i = 0; i < n; ++i) {
    ISO_ASSIGN_OR_RETURN(FormPiece p, ReadPiece(r, /*in_body=*/false));
    ISO_RETURN_IF_ERROR(CheckReach(p, 0));
    __int128 per = p.run;
    for (const FormPiece& b : p.body) {
      __int128 n_b = b.run;
      for (const FormLoop& l : b.loops) {
        n_b *= l.count;  // both < 2^62 before: no wrap
        if (n_b >= kMaxReach) return InvalidArgument("form: a group packs past 2^62 bytes");
      }
      per += n_b;
      if (per >= kMaxReach) return InvalidArgument("form: a group packs past 2^62 bytes");
    }
    for (const FormLoop& l : p.loops) {
      per *= l.count;
      if (per >= kMaxReach) return InvalidArgument("form: a piece packs past 2^62 bytes");
    }
    total += per;
    if (total >= kMaxReach) return InvalidArgument("form: packs past 2^62 bytes");
    form.pieces.push_back(std::move(p));
  }
  if (!r.done()) return InvalidArgument("form: bytes after its last piece");
  return form;
}

}  // namespace isometry
