#include "tools/bench/pack_pipeline.h"

#include <immintrin.h>
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <new>
#include <thread>

#include "tools/bench/bench_fail.h"
#include "tools/bench/stopwatch.h"

namespace isometry::bench {

namespace {

// Progress counters, each in its own cache line: the two threads write one
// each, and sharing a line would time the line's ping-pong, not the copy.
struct alignas(64) Counter {
  std::atomic<int64_t> value{0};
};

void Pause(bool spin) {
  if (spin) {
    _mm_pause();
  } else {
    sched_yield();  // one CPU for both threads: the other side must run
  }
}

// The first two CPUs this process may use, or none when it may use one.
std::vector<int> TwoCpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> cpus;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return cpus;
  for (int c = 0; c < CPU_SETSIZE && cpus.size() < 2; ++c) {
    if (CPU_ISSET(c, &set)) cpus.push_back(c);
  }
  if (cpus.size() < 2) cpus.clear();
  return cpus;
}

void PinTo(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  pthread_setaffinity_np(pthread_self(), sizeof set, &set);
}

}  // namespace

PackPipeline::PackPipeline(const std::byte* src, const Datatype& send, int64_t count,
                           std::byte* dst, const Datatype& recv, int64_t count_recv,
                           int64_t piece_bytes, int slots)
    : src_(src), dst_(dst), piece_bytes_(piece_bytes), slots_(slots), cpus_(TwoCpus()) {
  constexpr size_t kMaxRuns = size_t{1} << 20;
  const auto sent = Must(Segments(send, count, kMaxRuns), "send runs");
  const auto received = Must(Segments(recv, count_recv, kMaxRuns), "receive runs");
  pack_ = Cut(sent, piece_bytes, true);
  unpack_ = Cut(received, piece_bytes, false);
  if (pack_.first.size() != unpack_.first.size()) {
    Die("pack pipeline: the send and receive types pack different byte counts");
  }
  ring_.resize(static_cast<size_t>(piece_bytes) * static_cast<size_t>(slots));
}

PackPipeline::Side PackPipeline::Cut(const std::vector<Segment>& segments, int64_t piece_bytes,
                                     bool packing) {
  Side side;
  int64_t stream = 0;  // packed bytes before the current run
  side.first.push_back(0);
  for (const Segment& seg : segments) {
    for (int64_t done = 0; done < seg.length;) {
      const int64_t in_piece = stream % piece_bytes;
      const int64_t n = std::min(seg.length - done, piece_bytes - in_piece);
      const int64_t at = seg.offset + done;
      side.runs.push_back(packing ? Run{at, in_piece, n} : Run{in_piece, at, n});
      done += n;
      stream += n;
      if (stream % piece_bytes == 0) side.first.push_back(side.runs.size());
    }
  }
  if (side.first.back() != side.runs.size()) side.first.push_back(side.runs.size());
  return side;
}

double PackPipeline::Move(int messages) const {
  const bool spin = pinned();
  const auto pieces = static_cast<int64_t>(pack_.first.size() - 1);
  const int64_t total = pieces * messages;
  Counter packed, unpacked;
  std::byte* ring = ring_.data();
  auto slot = [&](int64_t k) { return ring + (k % slots_) * piece_bytes_; };
  const auto t0 = Clock::now();
  std::thread packer([&] {
    if (spin) PinTo(cpus_[0]);
    for (int64_t k = 0; k < total; ++k) {
      const int64_t p = k % pieces;
      // A message starts once the last one has arrived whole: each is a
      // copy of its own, as Isometry's Copy() and MPI_Recv are.
      const int64_t ready = p == 0 ? k : k - slots_ + 1;
      while (unpacked.value.load(std::memory_order_acquire) < ready) Pause(spin);
      std::byte* to = slot(k);
      for (size_t r = pack_.first[p]; r < pack_.first[p + 1]; ++r) {
        const Run& run = pack_.runs[r];
        std::memcpy(to + run.to, src_ + run.from, static_cast<size_t>(run.length));
      }
      packed.value.store(k + 1, std::memory_order_release);
    }
  });
  std::thread unpacker([&] {
    if (spin) PinTo(cpus_[1]);
    for (int64_t k = 0; k < total; ++k) {
      while (packed.value.load(std::memory_order_acquire) <= k) Pause(spin);
      const std::byte* from = slot(k);
      const int64_t p = k % pieces;
      for (size_t r = unpack_.first[p]; r < unpack_.first[p + 1]; ++r) {
        const Run& run = unpack_.runs[r];
        std::memcpy(dst_ + run.to, from + run.from, static_cast<size_t>(run.length));
      }
      unpacked.value.store(k + 1, std::memory_order_release);
    }
  });
  packer.join();
  unpacker.join();
  return SecondsSince(t0);
}

double PackPipeline::Time(int n) const {
  Move(std::max(1, n / 10));
  return Move(n) / n;
}

}  // namespace isometry::bench
