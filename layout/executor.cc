#include "layout/executor.h"

#include <cstdint>
#include <cstring>

namespace isometry {

namespace {

// Strides are stored as uint64_t with negative ones wrapped (two's
// complement); they are added to pointers as the signed values they stand
// for, since a wrapped unsigned addition overflows the pointer (undefined
// behaviour that clang's UBSan reports), even though the result is the same.
int64_t Signed(uint64_t stride) { return static_cast<int64_t>(stride); }

// Innermost loop with a run size known at compile time: the memcpy becomes
// a single load/store pair.
template <size_t N>
void InnerFixed(const CopyLoop& l, const std::byte* s, std::byte* d) {
  const int64_t ss = Signed(l.src_stride), ds = Signed(l.dst_stride);
  for (uint64_t i = 0; i < l.count; ++i) {
    std::memcpy(d, s, N);
    s += ss;
    d += ds;
  }
}

void InnerRun(const CopyLoop& l, uint64_t run, const std::byte* s, std::byte* d) {
  switch (run) {
    case 1:
      return InnerFixed<1>(l, s, d);
    case 2:
      return InnerFixed<2>(l, s, d);
    case 4:
      return InnerFixed<4>(l, s, d);
    case 8:
      return InnerFixed<8>(l, s, d);
    case 12:
      return InnerFixed<12>(l, s, d);
    case 16:
      return InnerFixed<16>(l, s, d);
    case 32:
      return InnerFixed<32>(l, s, d);
    default:
      break;
  }
  for (uint64_t i = 0; i < l.count; ++i) {
    std::memcpy(d, s, run);
    s += Signed(l.src_stride);
    d += Signed(l.dst_stride);
  }
}

void Nest(const CopyOp& op, int level, const std::byte* s, std::byte* d) {
  const CopyLoop& l = op.loops[level];
  if (level == op.num_loops - 1) {
    return InnerRun(l, op.run_bytes, s, d);
  }
  for (uint64_t i = 0; i < l.count; ++i) {
    Nest(op, level + 1, s, d);
    s += Signed(l.src_stride);
    d += Signed(l.dst_stride);
  }
}

}  // namespace

void ExecuteOp(const CopyOp& op, const std::byte* src, std::byte* dst) {
  const std::byte* s = src + op.src_offset;
  std::byte* d = dst + op.dst_offset;
  if (op.num_loops == 0) {
    std::memcpy(d, s, op.run_bytes);
    return;
  }
  Nest(op, 0, s, d);
}

void ExecuteProgram(const CopyProgram& program, const std::byte* src, std::byte* dst) {
  for (const CopyOp& op : program.ops) {
    ExecuteOp(op, src, dst);
  }
}

}  // namespace isometry
