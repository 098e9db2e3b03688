// Copy programs: the compiled form of "copy this box from instance A to
// instance B". The layout engine emits them; channels execute them.
//
// A program is a list of ops. Each op copies `run_bytes` contiguous bytes at
// every point of a small loop nest (outermost loop first):
//
//   for i0 < loops[0].count: ... for ik < loops[k].count:
//     memcpy(dst + dst_offset + sum(i_j * dst_stride_j),
//            src + src_offset + sum(i_j * src_stride_j), run_bytes)
//
// Programs are canonical: loops of count 1 are gone, adjacent loops that
// step contiguously are merged, and a contiguous copy is a single op with no
// loops. MPI-style datatypes compile to the same form (each datatype node is
// a loop or a list of ops).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <vector>

namespace isometry {

inline constexpr int kMaxCopyLoops = 12;

// Strides are two's complement: the compiler may walk a blocked layout
// backwards, and a negative stride is stored wrapped around 2^64.
struct CopyLoop {
  uint64_t count = 1;
  uint64_t src_stride = 0;
  uint64_t dst_stride = 0;
  bool operator==(const CopyLoop&) const = default;
};

struct CopyOp {
  uint64_t src_offset = 0;
  uint64_t dst_offset = 0;
  uint64_t run_bytes = 0;
  int num_loops = 0;
  std::array<CopyLoop, kMaxCopyLoops> loops{};  // [0, num_loops), outermost first

  // Bytes this op moves.
  uint64_t bytes() const;
  // Contiguous runs this op issues.
  uint64_t runs() const;
};

struct CopyProgram {
  std::vector<CopyOp> ops;
  uint64_t bytes = 0;  // total bytes moved
  uint64_t runs = 0;   // total contiguous runs (the request count of a naive engine)
};

// Stores `loops` (outermost first, no unit loops) in `op`, folding
// trailing loops that step by the run into the run and merging adjacent
// loops that step as one: the last steps of both compilers' canonical
// form.
void FoldLoops(std::vector<CopyLoop> loops, CopyOp& op);

// The canonical program of one contiguous copy of `bytes` from offset 0 to
// offset 0: a single op, no loops.
std::shared_ptr<const CopyProgram> ContiguousProgram(uint64_t bytes);

// Sets p.bytes and p.runs from its ops.
void TallyProgram(CopyProgram& p);

// `p` cut in two programs that together copy what it copies, each about
// half its bytes: its ops split in two groups, or a single op's outermost
// loop in two. One program (a copy of `p`) when it cannot be cut (a
// single run). For two threads sharing one copy.
std::vector<CopyProgram> SplitProgram(const CopyProgram& p);

}  // namespace isometry
