#include "procmem/cma_gather.h"

#include <algorithm>
#include <vector>

#include "layout/executor.h"

namespace isometry {

std::optional<ProgramExtent> SourceExtent(const CopyProgram& program) {
  __int128 lo = 0, hi = 0;
  bool any = false;
  for (const CopyOp& op : program.ops) {
    bool empty = op.run_bytes == 0;
    for (int k = 0; k < op.num_loops; ++k) empty |= op.loops[k].count == 0;
    if (empty) continue;
    // Strides wrap modulo 2^64 (copy_program.h): read them as signed.
    __int128 first = op.src_offset, last = op.src_offset;
    for (int k = 0; k < op.num_loops; ++k) {
      const __int128 step = static_cast<__int128>(static_cast<int64_t>(op.loops[k].src_stride)) *
                            static_cast<__int128>(op.loops[k].count - 1);
      (step < 0 ? first : last) += step;
    }
    last += op.run_bytes;
    lo = any ? std::min(lo, first) : first;
    hi = any ? std::max(hi, last) : last;
    any = true;
  }
  if (!any || lo < 0 || hi > static_cast<__int128>(UINT64_MAX)) return std::nullopt;
  return ProgramExtent{static_cast<uint64_t>(lo), static_cast<uint64_t>(hi)};
}

bool RunsCostMoreThanExtent(uint64_t runs, uint64_t extent) {
  return static_cast<double>(runs) * kCmaRunNanos >
         static_cast<double>(extent) * kCmaExtentByteNanos;
}

bool GatherPays(uint64_t runs, uint64_t extent) {
  if (extent > kMaxGatherBytes || runs < 2) return false;
  return RunsCostMoreThanExtent(runs, extent);
}

std::optional<Status> TryGatherRead(const CopyProgram& program, const CmaTarget& target,
                                    const std::atomic<bool>* cancelled) {
  if (target.direction != CmaDirection::kRead) return std::nullopt;
  const std::optional<ProgramExtent> extent = SourceExtent(program);
  if (!extent || !GatherPays(program.runs, extent->end - extent->begin)) return std::nullopt;
  const uint64_t bytes = extent->end - extent->begin;
  // One buffer per channel thread, kept: its pages are faulted in once.
  thread_local std::vector<std::byte> bounce;
  if (bounce.size() < bytes) bounce.resize(bytes);
  CmaTarget into = target;
  into.remote_base = target.remote_base + extent->begin;
  into.local_base = bounce.data();
  const Status read = CmaCopy(*ContiguousProgram(bytes), into, cancelled);
  if (absl::IsCancelled(read) || absl::IsNotFound(read) || absl::IsFailedPrecondition(read)) {
    return read;  // cancelled, the process exited or exec()ed: final
  }
  if (!read.ok()) return std::nullopt;  // e.g. an unmapped page between runs
  // The program's source offsets are from remote_base; the bounce holds
  // them from extent->begin.
  ExecuteProgram(program, bounce.data() - extent->begin, target.local_base);
  return OkStatus();
}

}  // namespace isometry
