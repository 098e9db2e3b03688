#include "layout/form_restrict.h"

#include <vector>

namespace isometry {

namespace {

// Bytes of one iteration of `p`'s innermost level: its run, or its body.
uint64_t UnitBytes(const FormPiece& p) {
  if (p.body.empty()) return static_cast<uint64_t>(p.run);
  uint64_t n = 0;
  for (const FormPiece& b : p.body) n += b.bytes();
  return n;
}

// Bytes of one iteration of loop `level` (the loops inside it and the unit).
uint64_t LevelBytes(const FormPiece& p, size_t level) {
  uint64_t n = UnitBytes(p);
  for (size_t l = level + 1; l < p.loops.size(); ++l) n *= static_cast<uint64_t>(p.loops[l].count);
  return n;
}

void Slice(const FormPiece& p, size_t level, int64_t offset, uint64_t begin, uint64_t end,
           std::vector<FormPiece>& out);

// The unit of `p` (all loops fixed) at `offset`, bytes [begin, end) of it.
void SliceUnit(const FormPiece& p, int64_t offset, uint64_t begin, uint64_t end,
               std::vector<FormPiece>& out) {
  if (p.body.empty()) {
    out.push_back(
        {offset + static_cast<int64_t>(begin), static_cast<int64_t>(end - begin), {}, {}});
    return;
  }
  uint64_t at = 0;  // packed position of body piece b
  for (const FormPiece& b : p.body) {
    const uint64_t n = b.bytes();
    if (at < end && at + n > begin) {
      const uint64_t lo = begin > at ? begin - at : 0;
      const uint64_t hi = std::min(end - at, n);
      Slice(b, 0, offset + b.offset, lo, hi, out);
    }
    at += n;
  }
}

// Loops [level, ...) of `p`, its first iteration at `offset`: the bytes
// [begin, end) of what they cover. `offset` already includes p.offset.
void Slice(const FormPiece& p, size_t level, int64_t offset, uint64_t begin, uint64_t end,
           std::vector<FormPiece>& out) {
  if (begin >= end) return;
  if (level == p.loops.size()) return SliceUnit(p, offset, begin, end, out);
  const FormLoop& loop = p.loops[level];
  const uint64_t block = LevelBytes(p, level);
  if (begin == 0 && end == block * static_cast<uint64_t>(loop.count)) {
    // Whole: these loops as they are.
    FormPiece whole = p;
    whole.offset = offset;
    whole.loops.assign(p.loops.begin() + static_cast<std::ptrdiff_t>(level), p.loops.end());
    if (!p.body.empty()) whole.run = 0;
    out.push_back(std::move(whole));
    return;
  }
  const uint64_t first = begin / block, last = (end - 1) / block;
  auto at = [&](uint64_t i) { return offset + static_cast<int64_t>(i) * loop.stride; };
  if (first == last) {
    return Slice(p, level + 1, at(first), begin - first * block, end - first * block, out);
  }
  // Head: a partial first iteration; middle: whole ones; tail: a partial last.
  uint64_t mid_begin = first;
  if (begin % block != 0) {
    Slice(p, level + 1, at(first), begin % block, block, out);
    ++mid_begin;
  }
  uint64_t mid_end = last + 1;
  const bool partial_tail = end % block != 0;
  if (partial_tail) mid_end = last;
  if (mid_end > mid_begin) {
    FormPiece mid = p;
    mid.offset = at(mid_begin);
    mid.loops.assign(p.loops.begin() + static_cast<std::ptrdiff_t>(level), p.loops.end());
    mid.loops[0].count = static_cast<int64_t>(mid_end - mid_begin);
    if (!p.body.empty()) mid.run = 0;
    out.push_back(std::move(mid));
  }
  if (partial_tail) Slice(p, level + 1, at(last), 0, end - last * block, out);
}

}  // namespace

Result<CanonicalForm> RestrictForm(const CanonicalForm& form, uint64_t begin, uint64_t end) {
  const uint64_t total = form.bytes();
  if (begin > end || end > total) {
    return OutOfRange("packed range [", begin, ", ", end, ") of a ", total, "-byte stream");
  }
  CanonicalForm out;
  uint64_t at = 0;  // packed position of the current piece
  for (const FormPiece& p : form.pieces) {
    if (at >= end) break;
    const uint64_t n = p.bytes();
    if (at + n > begin) {
      const uint64_t lo = begin > at ? begin - at : 0;
      const uint64_t hi = std::min(end - at, n);
      Slice(p, 0, p.offset, lo, hi, out.pieces);
    }
    at += n;
  }
  return out;
}

}  // namespace isometry
