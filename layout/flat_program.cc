#include "layout/flat_program.h"

#include <cstring>

#include "layout/executor.h"

namespace isometry {

namespace {

// One run; the sizes scattered-point types are made of (an int, a float,
// a double, three of them) become fixed-size moves instead of a call.
// A switch, not a chain of compares: its jump moved LAMMPS's atoms
// faster (docs/benchmarks/history/2026-12.md).
void CopyRun(const std::byte* s, std::byte* d, uint64_t n) {
  switch (n) {
    case 4:
      std::memcpy(d, s, 4);
      return;
    case 8:
      std::memcpy(d, s, 8);
      return;
    case 12:
      std::memcpy(d, s, 12);
      return;
    case 16:
      std::memcpy(d, s, 16);
      return;
    case 24:
      std::memcpy(d, s, 24);
      return;
    case 32:
      std::memcpy(d, s, 32);
      return;
    case 48:
      std::memcpy(d, s, 48);
      return;
    default:
      std::memcpy(d, s, n);
  }
}

// Calls `run(src, dst)` for each run of `op` below loop `level`, from
// offsets `s` and `d`, in the order ExecuteOp copies them.
template <typename F>
void EachRun(const CopyOp& op, int level, uint64_t s, uint64_t d, F&& run) {
  if (level == op.num_loops) {
    run(s, d);
    return;
  }
  const CopyLoop& l = op.loops[level];
  for (uint64_t i = 0; i < l.count; ++i) {
    EachRun(op, level + 1, s, d, run);
    s += l.src_stride;  // wraps as the stride's two's complement says
    d += l.dst_stride;
  }
}

}  // namespace

FlatProgram::FlatProgram(const CopyProgram& program) : bytes_(program.bytes), runs_(program.runs) {
  steps_.reserve(program.ops.size());
  for (const CopyOp& op : program.ops) {
    if (op.runs() <= kSpreadRuns) {
      EachRun(op, 0, op.src_offset, op.dst_offset, [&](uint64_t s, uint64_t d) {
        steps_.push_back({s, d, op.run_bytes});
      });
    } else {
      steps_.push_back({0, 0, kLooped | looped_.size()});
      looped_.push_back(op);
    }
  }
}

void FlatProgram::Execute(const std::byte* src, std::byte* dst) const {
  for (const Step& s : steps_) {
    if (s.length & kLooped) {
      ExecuteOp(looped_[s.length & ~kLooped], src, dst);
    } else {
      CopyRun(src + s.src, dst + s.dst, s.length);
    }
  }
}

std::vector<FlatProgram> Flatten(const std::vector<CopyProgram>& programs) {
  std::vector<FlatProgram> out;
  out.reserve(programs.size());
  for (const CopyProgram& p : programs) out.emplace_back(p);
  return out;
}

}  // namespace isometry
