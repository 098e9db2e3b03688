// Oracles of the form tests: the runs a canonical form stands for
// (layout/datatype_form.h), expanded one by one, and patterned buffers
// holding datatype elements.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/datatype.h"
#include "layout/datatype_form.h"

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

}  // namespace isometry::testing
