#include "layout/executor.h"

#include <immintrin.h>

#include <algorithm>
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
// a single load/store pair. Runs of up to 16 bytes go four to an
// iteration: for them the loop's own counting and pointer steps cost as
// much as the move (docs/benchmarks/design-measurements.md, "Copy loops
// and plans").
template <size_t N>
void InnerFixed(const CopyLoop& l, const std::byte* s, std::byte* d) {
  const int64_t ss = Signed(l.src_stride), ds = Signed(l.dst_stride);
  uint64_t i = 0;
  if constexpr (N <= 16) {
    for (; i + 4 <= l.count; i += 4) {
      std::memcpy(d, s, N);
      std::memcpy(d + ds, s + ss, N);
      std::memcpy(d + 2 * ds, s + 2 * ss, N);
      std::memcpy(d + 3 * ds, s + 3 * ss, N);
      s += 4 * ss;
      d += 4 * ds;
    }
  }
  for (; i < l.count; ++i) {
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
    case 24:
      return InnerFixed<24>(l, s, d);
    case 32:
      return InnerFixed<32>(l, s, d);
    case 48:
      return InnerFixed<48>(l, s, d);
    case 64:
      return InnerFixed<64>(l, s, d);
    case 128:
      return InnerFixed<128>(l, s, d);
    default:
      break;
  }
  for (uint64_t i = 0; i < l.count; ++i) {
    std::memcpy(d, s, run);
    s += Signed(l.src_stride);
    d += Signed(l.dst_stride);
  }
}

// One run with non-temporal stores: the bytes up to the first aligned
// destination address and the tail go through memcpy; the caller fences
// once after all runs (ExecuteOp, ExecuteProgram). 32-byte AVX2 stores
// where the CPU has them: large runs move noticeably more than with 16-byte
// SSE2 ones, and software prefetching on top of either was slower
// (docs/benchmarks/design-measurements.md, "Copy loops and plans"). The
// two loops differ in width, intrinsics and the AVX2 one's target
// attribute, so they stay two functions.
void StreamRun(const std::byte* s, std::byte* d, uint64_t n) {
  static const bool avx2 = StreamStores::HaveAvx2();
  if (avx2) {
    StreamStores::Avx2(s, d, n);
  } else {
    StreamStores::Sse2(s, d, n);
  }
}

void InnerStream(const CopyLoop& l, uint64_t run, const std::byte* s, std::byte* d) {
  for (uint64_t i = 0; i < l.count; ++i) {
    StreamRun(s, d, run);
    s += Signed(l.src_stride);
    d += Signed(l.dst_stride);
  }
}

void Nest(const CopyOp& op, int level, bool stream, const std::byte* s, std::byte* d) {
  const CopyLoop& l = op.loops[level];
  if (level == op.num_loops - 1) {
    return stream ? InnerStream(l, op.run_bytes, s, d) : InnerRun(l, op.run_bytes, s, d);
  }
  for (uint64_t i = 0; i < l.count; ++i) {
    Nest(op, level + 1, stream, s, d);
    s += Signed(l.src_stride);
    d += Signed(l.dst_stride);
  }
}

// Whether `op` runs with non-temporal stores; the caller then fences.
bool Streams(const CopyOp& op, Stores stores) {
  return stores == Stores::kStreaming && op.run_bytes >= kStreamRunBytes;
}

void RunOp(const CopyOp& op, bool stream, const std::byte* src, std::byte* dst) {
  const std::byte* s = src + op.src_offset;
  std::byte* d = dst + op.dst_offset;
  if (op.num_loops == 0) {
    if (stream) {
      StreamRun(s, d, op.run_bytes);
    } else {
      std::memcpy(d, s, op.run_bytes);
    }
    return;
  }
  Nest(op, 0, stream, s, d);
}

}  // namespace

bool StreamStores::HaveAvx2() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") != 0;
}

void StreamStores::Sse2(const std::byte* s, std::byte* d, uint64_t n) {
  const uint64_t head = std::min<uint64_t>(n, (16 - reinterpret_cast<uintptr_t>(d) % 16) % 16);
  std::memcpy(d, s, head);
  s += head;
  d += head;
  n -= head;
  auto* out = reinterpret_cast<__m128i*>(d);
  const auto* in = reinterpret_cast<const __m128i*>(s);
  for (; n >= 64; n -= 64, in += 4, out += 4) {
    const __m128i a = _mm_loadu_si128(in);
    const __m128i b = _mm_loadu_si128(in + 1);
    const __m128i c = _mm_loadu_si128(in + 2);
    const __m128i e = _mm_loadu_si128(in + 3);
    _mm_stream_si128(out, a);
    _mm_stream_si128(out + 1, b);
    _mm_stream_si128(out + 2, c);
    _mm_stream_si128(out + 3, e);
  }
  std::memcpy(out, in, n);
}

__attribute__((target("avx2"))) void StreamStores::Avx2(const std::byte* s, std::byte* d,
                                                        uint64_t n) {
  const uint64_t head = std::min<uint64_t>(n, (32 - reinterpret_cast<uintptr_t>(d) % 32) % 32);
  std::memcpy(d, s, head);
  s += head;
  d += head;
  n -= head;
  auto* out = reinterpret_cast<__m256i*>(d);
  const auto* in = reinterpret_cast<const __m256i*>(s);
  for (; n >= 128; n -= 128, in += 4, out += 4) {
    const __m256i a = _mm256_loadu_si256(in);
    const __m256i b = _mm256_loadu_si256(in + 1);
    const __m256i c = _mm256_loadu_si256(in + 2);
    const __m256i e = _mm256_loadu_si256(in + 3);
    _mm256_stream_si256(out, a);
    _mm256_stream_si256(out + 1, b);
    _mm256_stream_si256(out + 2, c);
    _mm256_stream_si256(out + 3, e);
  }
  std::memcpy(out, in, n);
}

void ExecuteOp(const CopyOp& op, const std::byte* src, std::byte* dst, Stores stores) {
  const bool stream = Streams(op, stores);
  RunOp(op, stream, src, dst);
  if (stream) {
    _mm_sfence();  // the non-temporal stores are visible before completion is
  }
}

void ExecuteProgram(const CopyProgram& program, const std::byte* src, std::byte* dst,
                    Stores stores) {
  bool streamed = false;
  for (const CopyOp& op : program.ops) {
    const bool stream = Streams(op, stores);
    RunOp(op, stream, src, dst);
    streamed |= stream;
  }
  if (streamed) {
    _mm_sfence();  // the non-temporal stores are visible before completion is
  }
}

}  // namespace isometry
