#include "tools/bench/pack_pipe_limit.h"

#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <thread>
#include <vector>

#include "layout/copy_program.h"
#include "layout/executor.h"
#include "layout/packed_pieces.h"
#include "layout/serve_window.h"
#include "tools/bench/bench_fail.h"

namespace isometry::bench {
namespace {

using Clock = std::chrono::steady_clock;

constexpr uint64_t kPayload = uint64_t{2} << 20;
constexpr int kWindows = 4;

CopyProgram VectorProgram(uint64_t block) {
  CopyOp op;
  op.run_bytes = block;
  FoldLoops({{.count = kPayload / block, .src_stride = 2 * block, .dst_stride = 2 * block}}, op);
  CopyProgram p;
  p.ops.push_back(op);
  TallyProgram(p);
  return p;
}

struct Ends {
  std::vector<std::byte> src, dst, ring, stage;
  std::vector<CopyProgram> pack, unpack;
};

// Bytes/s of the best of kWindows windows, one way (`staged`: packed
// aside, then copied into the slot in one memcpy).
double OneWay(Ends& e, bool staged, std::chrono::milliseconds budget) {
  const uint64_t n = e.pack.size();
  std::atomic<uint64_t> filled{0}, emptied{0}, moved{0};
  std::atomic<bool> stop{false};
  // Both sides spin, as a served read's do while pieces flow.
  auto wait_until = [&](const std::atomic<uint64_t>& counter, uint64_t at_least) {
    while (counter.load(std::memory_order_acquire) < at_least) {
      if (stop.load(std::memory_order_relaxed)) return false;
      _mm_pause();
    }
    return true;
  };
  auto slot = [&](uint64_t k) {
    return e.ring.data() + (k % serve_window::kSlots) * serve_window::kSlotBytes;
  };
  double best = 0;
  {
    std::jthread packer([&] {
      for (uint64_t k = 0;
           k < serve_window::kSlots || wait_until(emptied, k - serve_window::kSlots + 1); ++k) {
        if (stop.load(std::memory_order_relaxed)) return;
        const CopyProgram& piece = e.pack[k % n];
        if (staged) {
          ExecuteProgram(piece, e.src.data(), e.stage.data());
          std::memcpy(slot(k), e.stage.data(), piece.bytes);
        } else {
          ExecuteProgram(piece, e.src.data(), slot(k));
        }
        filled.store(k + 1, std::memory_order_release);
      }
    });
    std::jthread unpacker([&] {
      for (uint64_t k = 0; wait_until(filled, k + 1); ++k) {
        const CopyProgram& piece = e.unpack[k % n];
        ExecuteProgram(piece, slot(k), e.dst.data());
        moved.fetch_add(piece.bytes, std::memory_order_relaxed);
        emptied.store(k + 1, std::memory_order_release);
      }
    });
    // A quarter of the budget to settle (the threads spread over the
    // cores), then the best window: a shared host may take a vCPU away for
    // a while in any one of them.
    const Clock::time_point start = Clock::now();
    std::this_thread::sleep_until(start + budget / 4);
    const Clock::duration window = (budget - budget / 4) / kWindows;
    Clock::time_point at = Clock::now();
    uint64_t moved_at = moved.load();
    for (int w = 0; w < kWindows; ++w) {
      std::this_thread::sleep_until(at + window);
      const uint64_t now_moved = moved.load();
      const Clock::time_point now = Clock::now();
      best = std::max(best, static_cast<double>(now_moved - moved_at) /
                                std::max(std::chrono::duration<double>(now - at).count(), 1e-9));
      at = now;
      moved_at = now_moved;
    }
    stop.store(true);
  }
  return best;
}

}  // namespace

double PackPipeLimitGBps(uint64_t block, std::chrono::milliseconds budget) {
  if (block == 0 || kPayload % block != 0) Die("pack pipe limit: a block must divide 2 MiB");
  const CopyProgram program = VectorProgram(block);
  const uint64_t piece = serve_window::PieceBytesFor(program.bytes);
  Ends e;
  e.src.resize(2 * kPayload);
  e.dst.resize(2 * kPayload);
  e.ring.resize(serve_window::kSlots * serve_window::kSlotBytes);
  e.stage.resize(serve_window::kSlotBytes);
  for (size_t i = 0; i < e.src.size(); ++i) e.src[i] = static_cast<std::byte>(i * 7 + 1);
  e.pack = CutPacked(program, piece, PackSide::kPack);
  e.unpack = CutPacked(program, piece, PackSide::kUnpack);
  double best = 0;
  for (const bool staged : {false, true}) best = std::max(best, OneWay(e, staged, budget / 2));
  // The figure counts only if the pieces moved the vector: every block in
  // place, every gap untouched.
  for (uint64_t at = 0; at < e.dst.size(); at += 2 * block) {
    if (std::memcmp(e.dst.data() + at, e.src.data() + at, block) != 0 ||
        std::any_of(e.dst.begin() + static_cast<std::ptrdiff_t>(at + block),
                    e.dst.begin() + static_cast<std::ptrdiff_t>(at + 2 * block),
                    [](std::byte b) { return b != std::byte{0}; })) {
      Die("pack pipe limit: the pieces left wrong bytes");
    }
  }
  return best / 1e9;
}

}  // namespace isometry::bench
