#include "channels/disk/disk_request.h"

#include <algorithm>
#include <array>
#include <limits>

#include "channels/disk/direct_io.h"

namespace isometry::disk {

namespace {

// An op that moves nothing (hand-built programs may have them).
bool MovesNothing(const CopyOp& op) {
  if (op.run_bytes == 0) return true;
  for (int l = 0; l < op.num_loops; ++l) {
    if (op.loops[l].count == 0) return true;
  }
  return false;
}

uint64_t FileStride(const CopyLoop& loop, bool write) {
  return write ? loop.dst_stride : loop.src_stride;
}
uint64_t MemStride(const CopyLoop& loop, bool write) {
  return write ? loop.src_stride : loop.dst_stride;
}

// Appends the runs of one op to `runs` in its loops' order and clears
// `sorted` if one goes backwards in the file; false when `req` is cancelled
// meanwhile.
bool ListOpRuns(const CopyOp& op, bool write, uint64_t file_base, std::byte* host,
                const ChannelRequest& req, std::vector<FileRun>& runs, bool& sorted) {
  auto emit = [&](uint64_t file, uint64_t mem, uint64_t len) {
    if (!runs.empty() && runs.back().file > file_base + file) sorted = false;
    runs.push_back({file_base + file, host + mem, len});
  };
  const uint64_t f0 = write ? op.dst_offset : op.src_offset;
  const uint64_t m0 = write ? op.src_offset : op.dst_offset;
  if (op.num_loops == 0) {
    emit(f0, m0, op.run_bytes);
    return true;
  }
  std::array<uint64_t, kMaxCopyLoops> idx{};
  while (true) {
    uint64_t f = f0, m = m0;
    for (int l = 0; l < op.num_loops; ++l) {
      f += idx[l] * FileStride(op.loops[l], write);
      m += idx[l] * MemStride(op.loops[l], write);
    }
    emit(f, m, op.run_bytes);
    if (runs.size() % kCancelCheckRuns == 0 && req.Cancelled()) return false;
    int l = op.num_loops - 1;
    while (l >= 0 && ++idx[l] == op.loops[l].count) idx[l--] = 0;
    if (l < 0) return true;
  }
}

// Sorts `runs` by file offset (unless already sorted) and merges neighbours
// that touch in the file and in memory.
std::vector<FileRun> SortAndMerge(std::vector<FileRun> runs, bool sorted) {
  if (!sorted) {
    std::stable_sort(runs.begin(), runs.end(),
                     [](const FileRun& a, const FileRun& b) { return a.file < b.file; });
  }
  std::vector<FileRun> merged;
  for (const FileRun& run : runs) {
    if (!merged.empty() && merged.back().file + merged.back().len == run.file &&
        merged.back().mem + merged.back().len == run.mem) {
      merged.back().len += run.len;
    } else {
      merged.push_back(run);
    }
  }
  return merged;
}

}  // namespace

std::optional<FileSpan> FileSideSpan(const CopyProgram& p, bool write) {
  __int128 lo = std::numeric_limits<int64_t>::max(), hi = 0;
  bool moves = false;
  for (const CopyOp& op : p.ops) {
    if (MovesNothing(op)) continue;
    moves = true;
    __int128 first = write ? op.dst_offset : op.src_offset, last = first + op.run_bytes;
    for (int l = 0; l < op.num_loops; ++l) {
      const auto stride = static_cast<int64_t>(FileStride(op.loops[l], write));
      const __int128 reach = static_cast<__int128>(op.loops[l].count - 1) * stride;
      (reach < 0 ? first : last) += reach;
    }
    lo = std::min(lo, first);
    hi = std::max(hi, last);
  }
  if (!moves) return std::nullopt;
  return FileSpan{lo, hi};
}

std::optional<std::vector<FileRun>> ListRuns(const CopyProgram& p, bool write, uint64_t file_base,
                                             std::byte* host, const ChannelRequest& req) {
  std::vector<FileRun> runs;
  runs.reserve(p.runs);
  bool sorted = true;
  for (const CopyOp& program_op : p.ops) {
    if (MovesNothing(program_op)) continue;
    // A loop nest is a product: any loop order visits the same runs.
    // Largest file stride outermost visits them in file order (no sort
    // for a transposed op, whose loops run across the file).
    CopyOp op = program_op;
    std::stable_sort(op.loops.begin(), op.loops.begin() + op.num_loops,
                     [&](const CopyLoop& a, const CopyLoop& b) {
                       return static_cast<int64_t>(FileStride(a, write)) >
                              static_cast<int64_t>(FileStride(b, write));
                     });
    if (!ListOpRuns(op, write, file_base, host, req, runs, sorted)) return std::nullopt;
  }
  if (req.Cancelled()) return std::nullopt;
  return SortAndMerge(std::move(runs), sorted);
}

void CutRun(Request& r, const FileRun& run, bool in_staging, uint64_t max_io_bytes) {
  const bool has_direct = r.file->direct_fd >= 0;
  const uint64_t a = run.file, e = run.file + run.len;
  auto add = [&](uint64_t off, uint64_t len, bool body) {
    Io io;
    io.owner = &r;
    io.file_offset = off;
    io.length = len;
    io.mem = run.mem + (off - a);
    io.in_staging = in_staging;
    if (body && has_direct) {
      io.direct = true;
      if (!Aligned(io.mem)) {  // aligned file range, unaligned host memory
        io.bounce = true;
        io.host = io.mem;
        io.mem = nullptr;
      }
    }
    r.ios.push_back(io);
  };
  const uint64_t body_lo = std::min(AlignUp(a), e);
  const uint64_t body_hi = std::max(AlignDown(e), body_lo);
  if (a < body_lo) add(a, body_lo - a, false);
  for (uint64_t o = body_lo; o < body_hi;) {
    const uint64_t n = std::min(max_io_bytes, body_hi - o);
    add(o, n, true);
    o += n;
  }
  if (body_hi < e) add(body_hi, e - body_hi, false);
}

}  // namespace isometry::disk
