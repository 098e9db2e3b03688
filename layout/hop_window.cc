#include "layout/hop_window.h"

#include <cstring>

namespace isometry::hop_window {

namespace {

constexpr uint64_t kAlign = 4096;

uint64_t AlignUp(uint64_t v) { return (v + kAlign - 1) / kAlign * kAlign; }

}  // namespace

std::optional<Geometry> GeometryFor(uint64_t window_bytes, uint64_t arena_bytes) {
  Geometry g;
  g.arena_offset = AlignUp(sizeof(HopWindowHeader));
  g.arena_slot_bytes = arena_bytes / kHopEntries / kAlign * kAlign;
  if (g.arena_slot_bytes == 0) return std::nullopt;
  g.arena_bytes = g.arena_slot_bytes * kHopEntries;
  g.data_offset = AlignUp(g.arena_offset + g.arena_bytes);
  if (window_bytes <= g.data_offset) return std::nullopt;
  g.data_bytes = (window_bytes - g.data_offset) / kAlign * kAlign;
  if (g.data_bytes == 0) return std::nullopt;
  return g;
}

void InitHeader(HopWindowHeader& h, const Geometry& g) {
  h.magic = kMagic;
  h.version = kVersion;
  h.data_offset = g.data_offset;
  h.data_bytes = g.data_bytes;
  h.arena_offset = g.arena_offset;
  h.arena_bytes = g.arena_bytes;
  h.arena_slot_bytes = g.arena_slot_bytes;
  h.entries = kHopEntries;
  h.reserved = 0;
}

Status CheckHeader(const HopWindowHeader& h, uint64_t window_bytes) {
  if (window_bytes < sizeof(HopWindowHeader)) {
    return InvalidArgument("hop window of ", window_bytes, " bytes is smaller than its header");
  }
  if (h.magic != kMagic || h.version != kVersion || h.entries != kHopEntries) {
    return InvalidArgument("hop window header: magic, version or ring size not this library's");
  }
  const auto inside = [&](uint64_t offset, uint64_t bytes) {
    return offset >= sizeof(HopWindowHeader) && offset <= window_bytes &&
           bytes <= window_bytes - offset;
  };
  if (!inside(h.arena_offset, h.arena_bytes) || !inside(h.data_offset, h.data_bytes) ||
      h.arena_slot_bytes * kHopEntries != h.arena_bytes ||
      (h.arena_offset < h.data_offset ? h.arena_offset + h.arena_bytes > h.data_offset
                                      : h.data_offset + h.data_bytes > h.arena_offset)) {
    return InvalidArgument("hop window header: areas outside the window or overlapping");
  }
  return OkStatus();
}

uint64_t EncodedBytes(const CopyProgram& program) {
  uint64_t bytes = 0;
  for (const CopyOp& op : program.ops) {
    bytes += sizeof(ProgramRecord) + static_cast<uint64_t>(op.num_loops) * sizeof(CopyLoop);
  }
  return bytes;
}

std::optional<uint64_t> EncodeProgram(const CopyProgram& program, std::byte* out,
                                      uint64_t capacity) {
  uint64_t used = 0;
  for (const CopyOp& op : program.ops) {
    const uint64_t loops = static_cast<uint64_t>(op.num_loops) * sizeof(CopyLoop);
    if (capacity - used < sizeof(ProgramRecord) + loops) return std::nullopt;
    ProgramRecord r{};
    r.src_offset = op.src_offset;
    r.dst_offset = op.dst_offset;
    r.run_bytes = op.run_bytes;
    r.num_loops = static_cast<uint32_t>(op.num_loops);
    std::memcpy(out + used, &r, sizeof r);
    if (loops > 0) std::memcpy(out + used + sizeof r, op.loops.data(), loops);
    used += sizeof r + loops;
  }
  return used;
}

Result<CopyProgram> DecodeProgram(const std::byte* in, uint64_t ops, uint64_t bytes) {
  CopyProgram p;
  uint64_t at = 0;
  for (uint64_t i = 0; i < ops; ++i) {
    ProgramRecord r;
    if (bytes - at < sizeof r) return InvalidArgument("hop program op ", i, " is cut short");
    std::memcpy(&r, in + at, sizeof r);
    at += sizeof r;
    if (r.num_loops > static_cast<uint32_t>(kMaxCopyLoops)) {
      return InvalidArgument("hop program op ", i, ": ", r.num_loops, " loops");
    }
    if (bytes - at < r.num_loops * sizeof(CopyLoop)) {
      return InvalidArgument("hop program op ", i, " is cut short");
    }
    CopyOp op;
    op.src_offset = r.src_offset;
    op.dst_offset = r.dst_offset;
    op.run_bytes = r.run_bytes;
    op.num_loops = static_cast<int>(r.num_loops);
    for (uint32_t l = 0; l < r.num_loops; ++l) {
      std::memcpy(&op.loops[l], in + at, sizeof(CopyLoop));
      at += sizeof(CopyLoop);
      if (op.loops[l].count == 0) return InvalidArgument("hop program op ", i, ": a loop of 0");
    }
    p.bytes += op.bytes();
    p.runs += op.runs();
    p.ops.push_back(op);
  }
  if (at != bytes) return InvalidArgument("hop program: ", bytes - at, " bytes after its ops");
  return p;
}

std::optional<Span> SideSpan(const CopyProgram& program, bool source) {
  // Every term below is bounded by 2^64 * 2^64 * 12 loops, far inside
  // 128 bits, so the sums cannot overflow.
  Span s;
  bool first = true;
  for (const CopyOp& op : program.ops) {
    if (op.run_bytes == 0) continue;
    __int128 lo = source ? op.src_offset : op.dst_offset;
    __int128 hi = lo + op.run_bytes;
    for (int l = 0; l < op.num_loops; ++l) {
      const CopyLoop& loop = op.loops[l];
      if (loop.count == 0) return std::nullopt;
      // Strides are two's complement (copy_program.h).
      const auto stride = static_cast<int64_t>(source ? loop.src_stride : loop.dst_stride);
      const __int128 reach = static_cast<__int128>(stride) * (loop.count - 1);
      (reach < 0 ? lo : hi) += reach;
    }
    if (first || lo < s.lo) s.lo = lo;
    if (first || hi > s.hi) s.hi = hi;
    first = false;
  }
  return s;
}

}  // namespace isometry::hop_window
