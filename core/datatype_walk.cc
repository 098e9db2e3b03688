// The typemap in pack order: segment walking, MPI_Pack and MPI_Unpack.
//
// Every run the walker emits lies inside the true bounds of its element,
// which the constructors checked to be within +-kMaxDatatypeBytes, and the
// element origins (i * extent) are checked by SpanOfElements before a walk,
// so the offset arithmetic here cannot overflow.
#include <algorithm>
#include <cstring>

#include "core/datatype.h"
#include "core/datatype_internal.h"

namespace isometry {

namespace {

class Walker {
 public:
  explicit Walker(absl::FunctionRef<bool(const Segment&)> fn) : fn_(fn) {}

  // Each returns false once the callback stopped the walk.
  bool Walk(const DatatypeNode& n, int64_t base) {
    const DatatypeInfo& info = n.info;
    if (info.size == 0) {
      return true;
    }
    if (info.dense) {
      return Emit(base + info.lb, info.size);
    }
    switch (n.kind) {
      case DatatypeKind::kBasic:
        return Emit(base, info.size);
      case DatatypeKind::kContiguous:
        return Block(n.children[0], base, n.count);
      case DatatypeKind::kVector:
        for (int64_t i = 0; i < n.count; ++i) {
          if (!Block(n.children[0], base + i * n.stride, n.blocklength)) {
            return false;
          }
        }
        return true;
      case DatatypeKind::kIndexed:
      case DatatypeKind::kIndexedBlock:
      case DatatypeKind::kStruct:
        for (size_t i = 0; i < n.displacements.size(); ++i) {
          const Datatype& t = n.kind == DatatypeKind::kStruct ? n.children[i] : n.children[0];
          const int64_t len =
              n.kind == DatatypeKind::kIndexedBlock ? n.blocklength : n.blocklengths[i];
          if (!Block(t, base + n.displacements[i], len)) {
            return false;
          }
        }
        return true;
      case DatatypeKind::kResized:
        return Walk(n.children[0].node(), base);
      case DatatypeKind::kSubarray:
      case DatatypeKind::kDarray:
        return Dims(n, 0, base);
    }
    return true;
  }

  bool Flush() {
    if (pending_.length == 0) {
      return true;
    }
    const Segment s = pending_;
    pending_.length = 0;
    return fn_(s);
  }

 private:
  bool Emit(int64_t offset, int64_t length) {
    if (length == 0) {
      return true;
    }
    if (pending_.length > 0 && pending_.offset + pending_.length == offset) {
      pending_.length += length;
      return true;
    }
    if (!Flush()) {
      return false;
    }
    pending_ = Segment{offset, length};
    return true;
  }

  // n consecutive elements of t from base, one extent apart.
  bool Block(const Datatype& t, int64_t base, int64_t n) {
    const DatatypeInfo& info = t.info();
    if (info.size == 0 || n == 0) {
      return true;
    }
    if (info.dense) {
      return Emit(base + info.lb, n * info.size);
    }
    for (int64_t j = 0; j < n; ++j) {
      if (!Walk(t.node(), base + j * info.extent)) {
        return false;
      }
    }
    return true;
  }

  // Indices of dims[k] in order; the last dim places elements of the old type.
  bool Dims(const DatatypeNode& n, size_t k, int64_t base) {
    const ArrayDim& d = n.dims[k];
    const bool last = k + 1 == n.dims.size();
    const Datatype& old = n.children[0];
    const bool runs = last && old.info().dense && d.elem_stride == old.info().extent;
    for (int64_t b = 0; b <= d.full_blocks; ++b) {
      const int64_t len = b < d.full_blocks ? d.block : d.tail;
      const int64_t first = d.first + b * d.cycle;
      if (runs) {
        if (!Block(old, base + first * d.elem_stride, len)) {
          return false;
        }
        continue;
      }
      for (int64_t j = 0; j < len; ++j) {
        const int64_t at = base + (first + j) * d.elem_stride;
        if (!(last ? Walk(old.node(), at) : Dims(n, k + 1, at))) {
          return false;
        }
      }
    }
    return true;
  }

  absl::FunctionRef<bool(const Segment&)> fn_;
  Segment pending_;
};

}  // namespace

Result<ByteSpan> SpanOfElements(const Datatype& type, int64_t count) {
  if (count < 0) {
    return InvalidArgument("datatype count must be >= 0, got ", count);
  }
  const DatatypeInfo& info = type.info();
  if (count == 0 || info.size == 0) {
    return ByteSpan{};
  }
  Arith a;
  const int64_t shift = a.Mul(count - 1, info.extent);
  const int64_t true_ub = a.Add(info.true_lb, info.true_extent);
  ByteSpan s;
  s.begin = std::min(info.true_lb, a.Add(info.true_lb, shift));
  s.end = std::max(true_ub, a.Add(true_ub, shift));
  if (!a.ok() || s.begin < -kMaxDatatypeBytes * 4 || s.end > kMaxDatatypeBytes * 4) {
    return OutOfRange("datatype count ", count, " with extent ", info.extent,
                      " overflows 64-bit byte offsets");
  }
  return s;
}

Status ForEachSegment(const Datatype& type, int64_t count,
                      absl::FunctionRef<bool(const Segment&)> fn) {
  ISO_RETURN_IF_ERROR(SpanOfElements(type, count).status());
  Walker w(fn);
  const DatatypeInfo& info = type.info();
  if (info.dense && count > 0) {
    // size == extent, so count elements are one run (size * count fits:
    // the span check above bounded it).
    fn(Segment{info.lb, info.size * count});
    return OkStatus();
  }
  for (int64_t i = 0; i < count; ++i) {
    if (!w.Walk(type.node(), i * info.extent)) {
      return OkStatus();
    }
  }
  w.Flush();
  return OkStatus();
}

Result<std::vector<Segment>> Segments(const Datatype& type, int64_t count, size_t max_segments) {
  std::vector<Segment> out;
  bool over = false;
  ISO_RETURN_IF_ERROR(ForEachSegment(type, count, [&](const Segment& s) {
    if (out.size() >= max_segments) {
      over = true;
      return false;
    }
    out.push_back(s);
    return true;
  }));
  if (over) {
    return ResourceExhausted("datatype ", type.ToString(200), " x ", count, " has more than ",
                             max_segments, " segments");
  }
  return out;
}

namespace {

// Checks buffer and packed sizes for count elements at origin.
Status CheckBuffers(size_t buffer_size, int64_t origin, const Datatype& type, int64_t count,
                    size_t packed_size) {
  ISO_ASSIGN_OR_RETURN(const ByteSpan span, SpanOfElements(type, count));
  const auto total = CheckedMul(count, type.size());
  if (!total) {
    return OutOfRange("packed size of ", count, " elements overflows");
  }
  if (static_cast<uint64_t>(*total) > packed_size) {
    return InvalidArgument("packed buffer holds ", packed_size, " bytes, ", count,
                           " elements need ", *total);
  }
  if (span.begin == span.end) {
    return OkStatus();
  }
  const auto begin = CheckedAdd(origin, span.begin);
  const auto end = CheckedAdd(origin, span.end);
  if (!begin || !end || *begin < 0 || static_cast<uint64_t>(*end) > buffer_size) {
    return OutOfRange("datatype ", type.ToString(200), " x ", count, " at origin ", origin,
                      " reaches bytes [", origin, span.begin >= 0 ? "+" : "", span.begin, ", ",
                      origin, "+", span.end, ") outside a buffer of ", buffer_size, " bytes");
  }
  return OkStatus();
}

}  // namespace

Status Pack(std::span<const uint8_t> buffer, int64_t origin, const Datatype& type, int64_t count,
            std::span<uint8_t> packed) {
  ISO_RETURN_IF_ERROR(CheckBuffers(buffer.size(), origin, type, count, packed.size()));
  size_t done = 0;
  bool overrun = false;
  ISO_RETURN_IF_ERROR(ForEachSegment(type, count, [&](const Segment& s) {
    // Defence in depth: the typemap never holds more than count * size.
    if (static_cast<uint64_t>(s.length) > packed.size() - done) {
      overrun = true;
      return false;
    }
    std::memcpy(packed.data() + done, buffer.data() + origin + s.offset,
                static_cast<size_t>(s.length));
    done += static_cast<size_t>(s.length);
    return true;
  }));
  if (overrun) {
    return Internal("datatype ", type.ToString(200), " yields more than its size");
  }
  return OkStatus();
}

Status Unpack(std::span<const uint8_t> packed, const Datatype& type, int64_t count,
              std::span<uint8_t> buffer, int64_t origin) {
  ISO_RETURN_IF_ERROR(CheckBuffers(buffer.size(), origin, type, count, packed.size()));
  size_t done = 0;
  bool overrun = false;
  ISO_RETURN_IF_ERROR(ForEachSegment(type, count, [&](const Segment& s) {
    if (static_cast<uint64_t>(s.length) > packed.size() - done) {
      overrun = true;
      return false;
    }
    std::memcpy(buffer.data() + origin + s.offset, packed.data() + done,
                static_cast<size_t>(s.length));
    done += static_cast<size_t>(s.length);
    return true;
  }));
  if (overrun) {
    return Internal("datatype ", type.ToString(200), " yields more than its size");
  }
  return OkStatus();
}

}  // namespace isometry
