// Oracles of the form tests: the runs a canonical form stands for
// (layout/datatype_form.h), expanded one by one, and patterned buffers
// holding datatype elements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "core/datatype.h"
#include "layout/datatype_form.h"
#include "unit/random_datatype.h"

namespace isometry::testing {

// Calls fn(offset) for every point of a piece's loop nest.
template <typename F>
inline void ForEachIteration(const FormPiece& p, F&& fn) {
  const size_t k = p.loops.size();
  std::vector<int64_t> idx(k, 0);
  while (true) {
    int64_t off = p.offset;
    for (size_t i = 0; i < k; ++i) off += idx[i] * p.loops[i].stride;
    fn(off);
    size_t i = k;
    while (i > 0 && ++idx[i - 1] == p.loops[i - 1].count) idx[--i] = 0;
    if (i == 0) break;
  }
}

inline void Append(std::vector<Segment>& out, int64_t off, int64_t len) {
  if (!out.empty() && out.back().offset + out.back().length == off) {
    out.back().length += len;
  } else {
    out.push_back({off, len});
  }
}

// The runs a form stands for, merged as ForEachSegment merges them.
inline std::vector<Segment> Expand(const CanonicalForm& f) {
  std::vector<Segment> out;
  for (const FormPiece& p : f.pieces) {
    ForEachIteration(p, [&](int64_t at) {
      if (p.body.empty()) {
        Append(out, at, p.run);
        return;
      }
      for (const FormPiece& b : p.body) {
        ForEachIteration(b, [&](int64_t o) { Append(out, at + o, b.run); });
      }
    });
  }
  return out;
}

// A buffer holding `count` elements of a datatype, patterned by `seed`,
// with the origin (MPI's buf) at bytes[origin].
struct Buffer {
  std::vector<uint8_t> bytes;
  int64_t origin = 0;
};

inline Buffer BufferFor(const Datatype& t, int64_t count, uint8_t seed) {
  const ByteSpan span = *SpanOfElements(t, count);
  Buffer b;
  b.bytes.resize(static_cast<size_t>(span.end - span.begin) + 1);
  for (size_t i = 0; i < b.bytes.size(); ++i) b.bytes[i] = static_cast<uint8_t>(i * 7 + seed);
  b.origin = -span.begin;
  return b;
}

inline bool Overlaps(const Datatype& t, int64_t count) {
  auto segs = *Segments(t, count, 1 << 20);
  std::sort(segs.begin(), segs.end(),
            [](const Segment& a, const Segment& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < segs.size(); ++i) {
    if (segs[i - 1].offset + segs[i - 1].length > segs[i].offset) return true;
  }
  return false;
}

inline const std::byte* At(const std::vector<uint8_t>& v, int64_t i) {
  return reinterpret_cast<const std::byte*>(v.data()) + i;
}

// A random copy between two datatypes: counts whose packed streams have the
// same size (at most 8192 bytes), a destination whose runs do not overlap,
// a patterned source and what MPI_Unpack(MPI_Pack(source)) leaves in the
// patterned destination: the oracle of a compiled copy. nullopt for a draw
// that does not qualify.
struct CopyCase {
  Datatype src, dst;
  int64_t src_count = 0, dst_count = 0, bytes = 0;
  Buffer source, want;
};

inline std::optional<CopyCase> RandomCopyCase(RandomDatatypes& gen, uint8_t src_seed,
                                              uint8_t dst_seed) {
  const Datatype s = gen.Next(static_cast<int>(gen.Int(1, 4)));
  const Datatype d = gen.Next(static_cast<int>(gen.Int(1, 4)));
  const int64_t l = std::lcm(s.size(), d.size());
  if (l > 8192) return std::nullopt;
  const int64_t sc = l / s.size(), dc = l / d.size();
  if (Overlaps(d, dc)) return std::nullopt;
  CopyCase c{s, d, sc, dc, l, BufferFor(s, sc, src_seed), BufferFor(d, dc, dst_seed)};
  std::vector<uint8_t> packed(static_cast<size_t>(l));
  if (!Pack(c.source.bytes, c.source.origin, s, sc, packed).ok() ||
      !Unpack(packed, d, dc, c.want.bytes, c.want.origin).ok()) {
    return std::nullopt;
  }
  return c;
}

}  // namespace isometry::testing
