#include "channels/calibrate.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <memory>
#include <thread>

#include "channels/calibration_timing.h"
#include "channels/gpu_memory.h"
#include "channels/host_pages.h"
#include "core/cpu_cache.h"
#include "core/instance.h"
#include "core/memory_limit.h"
#include "layout/compiler.h"
#include "layout/executor.h"

namespace isometry {

std::string GpuHostCurve(const std::string& channel, bool pinned) {
  return channel + (pinned ? ":pinned" : ":pageable");
}

std::string ContiguousCurve(const std::string& channel) { return channel + ":contiguous"; }
std::string Fields8Curve(const std::string& channel) { return channel + ":fields8"; }
std::string UnsyncedCurve(const std::string& channel) { return channel + ":unsynced"; }

namespace {

using calibration::Clock;
using calibration::MeasureSizes;
using calibration::TimeRequests;

constexpr uint64_t kGatherBytes = 4ull << 20;  // data per request of small runs

// A layout conversion whose contiguous pieces are `run` bytes: two fields
// of `run` bytes each, interleaved in the source (AOS) and one after the
// other in the destination (SOA), 4 MiB per request. What bounds a
// converting copy is the run (PREFIX of §4.2, in bytes); reading every byte
// of the source, as a real AOS->SOA does, keeps its memory traffic that of
// the data moved. From 2 MiB up a run is the whole request. Source and
// destination both span program->bytes.
// `fields` fields (MeasureChannel's argument) instead of two: every field
// pass reads the request's source again.
std::shared_ptr<const CopyProgram> Runs(uint64_t run, uint64_t fields) {
  auto p = std::make_shared<CopyProgram>();
  CopyOp op;
  op.run_bytes = run;
  const uint64_t count = fields * run >= kGatherBytes ? 1 : kGatherBytes / (fields * run);
  uint64_t runs = 1;
  if (count > 1) {
    op.num_loops = 2;
    op.loops[0] = {fields, run, count * run};  // field: next run in the source, next array
    op.loops[1] = {count, fields * run, run};  // point
    runs = fields * count;
  }
  p->ops.push_back(op);
  p->bytes = runs * run;
  p->runs = runs;
  return p;
}

// Runs(run, fields) as the layout compiler writes that conversion for the
// host executor: an AOS of `fields` fields of `run` bytes into its SOA,
// kGatherBytes a request. The compiler blocks the points so that a block's
// source stays in the L1 cache across the field passes; Runs' one pass per
// field over the whole request read the source from L3 each time, and its
// curve came out below the AOS->SOA copies it predicts
// (docs/benchmarks/design-measurements.md, "Calibration"). The host channels are calibrated with
// what they run; GPU channels (their own lowering) keep Runs.
std::shared_ptr<const CopyProgram> HostConversion(uint64_t run, uint64_t fields) {
  if (fields * run >= kGatherBytes || run > UINT32_MAX) return Runs(run, fields);
  const FieldSpace fs = FieldSpace::Uniform(static_cast<int>(fields), static_cast<uint32_t>(run));
  const InstanceShape aos{Box::FromExtents({static_cast<int64_t>(kGatherBytes / (fields * run))}),
                          fs, Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, fs, Layout::Soa(1)};
  Result<CopyProgram> compiled = CompileCopy(aos, soa, aos.bounds);
  // Shapes this simple always compile; should one not, the hand-written
  // program of the same bytes still measures the channel.
  if (!compiled.ok()) return Runs(run, fields);
  return std::make_shared<const CopyProgram>(*std::move(compiled));
}

// Windows per size for copies between host memory (MeasureSizes).
constexpr int kMemoryWindows = 3;

// Source and destination areas for host-memory calibration, faulted in.
// In huge pages, as the memory the daemon copies is (client pools, rings):
// where the host walks page tables expensively, 4 KiB-page areas copy at
// erratic speeds from one pass to the next (figures:
// docs/benchmarks/design-measurements.md, "Calibration").
struct Areas {
  HostPages src, dst;
  uint64_t bytes = 0;
};

Result<Areas> MakeAreas(uint64_t bytes) {
  Areas a;
  a.bytes = bytes;
  ISO_ASSIGN_OR_RETURN(a.src, HostPages::Map(bytes));
  ISO_ASSIGN_OR_RETURN(a.dst, HostPages::Map(bytes));
  std::memset(a.src.data(), 1, bytes);  // fault the pages in before timing
  std::memset(a.dst.data(), 0, bytes);
  return a;
}

}  // namespace

std::vector<uint64_t> CalibrationSizes(const ChannelCaps& caps) {
  std::vector<uint64_t> sizes;
  if (caps.converts_layout) {
    // Every power of two up to 64 B (field sizes, where layout changes
    // live), then powers of eight.
    for (uint64_t s = 1; s <= 64; s *= 2) sizes.push_back(s);
    for (uint64_t s = 512; s <= (64ull << 20); s *= 8) sizes.push_back(s);
    sizes.push_back(64ull << 20);
  } else {
    for (uint64_t s = 4096; s <= (64ull << 20); s *= 4) sizes.push_back(s);
  }
  return sizes;
}

uint64_t CalibrationAreaBytes(uint64_t llc_bytes, uint64_t memory_limit) {
  constexpr uint64_t kFloor = 128ull << 20;  // two slots of the largest request
  constexpr uint64_t kCap = 1ull << 30;
  constexpr uint64_t kSmallest = 16ull << 20;
  const uint64_t area = std::clamp(4 * std::min(llc_bytes, kCap), kFloor, kCap);
  return std::min(area, std::max(memory_limit / 8, kSmallest));
}

uint64_t CalibrationAreaBytes() {
  return CalibrationAreaBytes(LastLevelCacheBytes(), MemoryLimitBytes());
}

Result<std::vector<RateSample>> MeasureChannel(Channel& channel, std::chrono::milliseconds budget,
                                               uint64_t fields, uint64_t max_run) {
  // Every request reads and writes memory the previous ones did not touch
  // lately: consecutive slots of areas four times the last-level cache.
  // Measured on cache-resident buffers, Memcpy "peaks" at several times
  // what memory-bound copies run at.
  const uint64_t area = CalibrationAreaBytes();
  // Requests in flight at once must use different slots: with fewer slots
  // than requests in flight, two threads copied the same slot at the same
  // time and the second found its source in the cache, and "ran" far faster
  // than real copies (docs/benchmarks/design-measurements.md, "Calibration"). Larger
  // sizes are not measured; the throughput function stays flat past the
  // largest measured one (the samples carry its figure).
  const std::vector<uint64_t> all_sizes = CalibrationSizes(channel.caps());
  const uint64_t in_flight = static_cast<uint64_t>(std::max(1, channel.caps().max_in_flight));
  std::vector<uint64_t> sizes;
  for (uint64_t s : all_sizes) {
    if (s > max_run) break;
    if (s <= kGatherBytes || s <= area / (in_flight + 1)) sizes.push_back(s);
  }
  ISO_ASSIGN_OR_RETURN(const Areas areas, MakeAreas(area));
  ISO_ASSIGN_OR_RETURN(std::vector<RateSample> out,
                       MeasureSizes(
                           sizes, kGatherBytes, budget,
                           [&](uint64_t size, Clock::duration slice) {
                             auto program = HostConversion(size, std::max<uint64_t>(fields, 2));
                             const uint64_t slots = std::max<uint64_t>(1, area / program->bytes);
                             return TimeRequests(
                                 channel,
                                 [&](uint64_t k) {
                                   const uint64_t at = (k % slots) * program->bytes;
                                   // The stores of a memory-bound copy (a transfer's last hop
                                   // larger than the cache writes with non-temporal stores, runs of
                                   // 256 B and up: layout/executor.h): what this figure predicts.
                                   ChannelRequest r{program, HostBytes{areas.src.data() + at},
                                                    HostBytes{areas.dst.data() + at}};
                                   r.stream_stores = true;
                                   return r;
                                 },
                                 program->bytes, slice);
                           },
                           kMemoryWindows));
  for (size_t i = out.size(); i < all_sizes.size() && all_sizes[i] <= max_run; ++i) {
    out.push_back({all_sizes[i], out.back().bytes_per_s});
  }
  return out;
}

std::vector<uint64_t> ContiguousCalibrationSizes() {
  std::vector<uint64_t> sizes;
  for (uint64_t s = 4096; s <= (64ull << 20); s *= 4) sizes.push_back(s);
  return sizes;
}

Result<std::vector<RateSample>> MeasureContiguous(Channel& channel,
                                                  std::chrono::milliseconds budget) {
  const uint64_t llc = LastLevelCacheBytes();
  ISO_ASSIGN_OR_RETURN(const Areas areas, MakeAreas(CalibrationAreaBytes()));
  const uint64_t request_cap =
      channel.caps().request_bytes > 0 ? channel.caps().request_bytes : kGatherBytes;
  return MeasureSizes(
      ContiguousCalibrationSizes(), 0, budget,
      [&](uint64_t size, Clock::duration slice) {
        // A request of the runtime's size; in flight at once they never
        // share a slot (area / request >= 32 slots at the 4 MiB default).
        const uint64_t request = std::min(size, std::min(request_cap, areas.bytes / 8));
        auto program = ContiguousProgram(request);
        const uint64_t slots = std::max<uint64_t>(1, areas.bytes / request);
        return TimeRequests(
            channel,
            [&](uint64_t k) {
              const uint64_t at = (k % slots) * request;
              ChannelRequest r{program, HostBytes{areas.src.data() + at},
                               HostBytes{areas.dst.data() + at}};
              r.stream_stores = size > llc;
              return r;
            },
            request, slice, nullptr, size / request);
      },
      kMemoryWindows, llc + 1);
}

Result<RateSample> MeasureNodeCopy(std::chrono::milliseconds budget) {
  const unsigned threads = std::clamp(std::thread::hardware_concurrency(), 1u, 32u);
  // Two areas a thread, within a quarter of what the daemon may use
  // (CalibrationAreaBytes says why).
  const uint64_t per_thread =
      std::min(std::clamp<uint64_t>(2 * LastLevelCacheBytes() / threads, 8ull << 20, 64ull << 20),
               std::max<uint64_t>(MemoryLimitBytes() / (8 * uint64_t{threads}), 1ull << 20));
  std::vector<Areas> areas;
  for (unsigned t = 0; t < threads; ++t) {
    ISO_ASSIGN_OR_RETURN(Areas a, MakeAreas(per_thread));
    areas.push_back(std::move(a));
  }
  std::atomic<bool> go{false};
  std::atomic<unsigned> ready{0};
  std::vector<uint64_t> copies(threads, 0);
  Clock::time_point start, end;
  {
    std::vector<std::jthread> workers;
    for (unsigned t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        const Clock::time_point stop = start + budget;
        do {
          std::memcpy(areas[t].dst.data(), areas[t].src.data(), per_thread);
          ++copies[t];
        } while (Clock::now() < stop);
      });
    }
    while (ready.load() < threads) std::this_thread::yield();
    start = Clock::now();
    go.store(true, std::memory_order_release);
  }  // joins: the slowest thread's last copy ends the measurement
  end = Clock::now();
  uint64_t total = 0;
  for (uint64_t c : copies) total += c * per_thread;
  const double seconds = std::chrono::duration<double>(end - start).count();
  return RateSample{per_thread, static_cast<double>(total) / std::max(seconds, 1e-9)};
}

Result<RateSample> MeasureNodePipe(uint64_t slot_bytes, int slots, std::chrono::milliseconds budget,
                                   bool stream_ring) {
  slot_bytes = std::max<uint64_t>(slot_bytes, 4096);
  const auto depth = static_cast<uint64_t>(std::max(slots, 1));
  // The ends cycle through areas four times the cache, as a copy's
  // distinct source and destination do; the ring is the runtime's.
  const uint64_t area = std::max(CalibrationAreaBytes() / slot_bytes, uint64_t{1}) * slot_bytes;
  ISO_ASSIGN_OR_RETURN(const Areas ends, MakeAreas(area));
  ISO_ASSIGN_OR_RETURN(const Areas ring, MakeAreas(slot_bytes * depth));
  const uint64_t per_area = area / slot_bytes;
  const std::shared_ptr<const CopyProgram> program = ContiguousProgram(slot_bytes);
  // Slot k is filled by the first hop once the second has emptied slot
  // k - depth, and emptied once filled: a counter each, spun on with a
  // yield (both threads stay busy in a pipelined copy too).
  std::atomic<uint64_t> filled{0}, emptied{0};
  std::atomic<bool> stop{false};
  auto wait_until = [&](const std::atomic<uint64_t>& counter, uint64_t at_least) {
    while (counter.load(std::memory_order_acquire) < at_least) {
      if (stop.load(std::memory_order_relaxed)) return false;
      std::this_thread::yield();
    }
    return true;
  };
  std::byte* const src = ends.src.data();
  std::byte* const dst = ends.dst.data();
  std::byte* const slots_at = ring.src.data();
  const Clock::time_point start = Clock::now();
  // The figure is of the steady state: timed from when the ring has
  // turned twice (the threads have spread over the cores), or a quarter of
  // the budget: short samples timed from the start read well under the
  // steady state.
  // The rest is timed in kPipeWindows windows and the best one is the
  // figure, as the channel curves keep the best of their samples: where a
  // shared host takes a vCPU away for milliseconds at a time, a single
  // sample can read a third of what the copies it predicts run at, and the
  // best of four windows reads close to them (figures:
  // docs/benchmarks/design-measurements.md, "Calibration").
  constexpr int kPipeWindows = 4;
  double best = 0;
  {
    std::jthread up([&] {
      for (uint64_t k = 0; k < depth || wait_until(emptied, k - depth + 1); ++k) {
        if (stop.load(std::memory_order_relaxed)) return;
        ExecuteProgram(*program, src + (k % per_area) * slot_bytes,
                       slots_at + (k % depth) * slot_bytes,
                       stream_ring ? Stores::kStreaming : Stores::kCached);
        filled.store(k + 1, std::memory_order_release);
      }
    });
    std::jthread down([&] {
      for (uint64_t k = 0; wait_until(filled, k + 1); ++k) {
        ExecuteProgram(*program, slots_at + (k % depth) * slot_bytes,
                       dst + (k % per_area) * slot_bytes, Stores::kStreaming);
        emptied.store(k + 1, std::memory_order_release);
      }
    });
    while (emptied.load() < 2 * depth && Clock::now() - start < budget / 4) {
      std::this_thread::yield();
    }
    const Clock::time_point from = Clock::now();
    const Clock::duration window = (start + budget - from) / kPipeWindows;
    Clock::time_point at = from;
    uint64_t emptied_at = emptied.load();
    for (int w = 0; w < kPipeWindows; ++w) {
      std::this_thread::sleep_until(at + window);
      const uint64_t now_emptied = emptied.load();
      const Clock::time_point now = Clock::now();
      const double seconds = std::chrono::duration<double>(now - at).count();
      best = std::max(best, static_cast<double>((now_emptied - emptied_at) * slot_bytes) /
                                std::max(seconds, 1e-9));
      at = now;
      emptied_at = now_emptied;
    }
    // Where other work held a core through every window, no slot moved in
    // any of them: the figure is then the whole span's, waiting (at most
    // another budget) for the pipeline to move at all. A rate of 0 would
    // make the saved calibration unloadable and every pipelined plan look
    // impossible.
    const uint64_t emptied_from = emptied_at;
    while (best == 0 && emptied.load() == emptied_from && Clock::now() - at < budget) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    if (best == 0 && emptied.load() > 0) {
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      best = static_cast<double>(emptied.load() * slot_bytes) / std::max(seconds, 1e-9);
    }
    stop.store(true);
  }  // joins
  if (best <= 0) {
    return Unavailable(
        "calibration: two copying threads pipelined through a ring moved nothing "
        "in ",
        std::chrono::duration_cast<std::chrono::milliseconds>(2 * budget).count(),
        " ms (other work held the cores); calibrate again when the node is idle");
  }
  return RateSample{slot_bytes, best};
}

namespace {

// Device memory for a calibration, freed on every way out.
class DeviceArea {
 public:
  DeviceArea(GpuMemory& gpu, int device) : gpu_(gpu), device_(device) {}
  DeviceArea(const DeviceArea&) = delete;
  DeviceArea& operator=(const DeviceArea&) = delete;
  ~DeviceArea() {
    if (address_) gpu_.FreeDevice(device_, address_);
  }
  Status Allocate(uint64_t bytes) {
    ISO_ASSIGN_OR_RETURN(address_, gpu_.AllocateDevice(device_, bytes));
    return OkStatus();
  }
  DeviceBytes At(uint64_t offset) const { return {device_, address_ + offset}; }

 private:
  GpuMemory& gpu_;
  const int device_;
  uint64_t address_ = 0;
};

// Host pages pinned for the GPUs while it lives.
class PinnedRange {
 public:
  explicit PinnedRange(GpuMemory& gpu) : gpu_(gpu) {}
  PinnedRange(const PinnedRange&) = delete;
  PinnedRange& operator=(const PinnedRange&) = delete;
  ~PinnedRange() {
    if (base_) gpu_.UnpinHost(base_);
  }
  Status Pin(void* base, uint64_t bytes) {
    ISO_RETURN_IF_ERROR(gpu_.PinHost(base, bytes));
    base_ = base;
    return OkStatus();
  }

 private:
  GpuMemory& gpu_;
  void* base_ = nullptr;
};

}  // namespace

Result<GpuCurves> MeasureGpuChannel(Channel& channel, GpuMemory& gpu, int device, bool pinned,
                                    std::chrono::milliseconds budget) {
  const ChannelKind kind = channel.caps().kind;
  if (kind != ChannelKind::kGpuWrite && kind != ChannelKind::kGpuRead &&
      kind != ChannelKind::kGpuCopy) {
    return InvalidArgument("calibration: channel '", channel.caps().name, "' is not a GPU channel");
  }
  constexpr uint64_t kArea = 128ull << 20;  // two slots of the largest request
  DeviceArea dev(gpu, device), dev2(gpu, device);
  ISO_RETURN_IF_ERROR(dev.Allocate(kArea));
  HostPages host;
  PinnedRange pin(gpu);
  if (kind == ChannelKind::kGpuCopy) {
    ISO_RETURN_IF_ERROR(dev2.Allocate(kArea));
  } else {
    ISO_ASSIGN_OR_RETURN(host, HostPages::Map(kArea, /*populate=*/true));
    if (pinned) ISO_RETURN_IF_ERROR(pin.Pin(host.data(), kArea));
  }
  // Request k's ends at `at` in its slot.
  auto ends = [&](uint64_t at) -> std::pair<Endpoint, Endpoint> {
    if (kind == ChannelKind::kGpuCopy) return {dev.At(at), dev2.At(at)};
    const Endpoint h = HostBytes{host.data() + at};
    return kind == ChannelKind::kGpuWrite ? std::pair<Endpoint, Endpoint>{h, dev.At(at)}
                                          : std::pair<Endpoint, Endpoint>{dev.At(at), h};
  };
  auto time = [&](const std::shared_ptr<const CopyProgram>& program, Clock::duration slice,
                  uint64_t min_requests) {
    const uint64_t slots = std::max<uint64_t>(1, kArea / program->bytes);
    return TimeRequests(
        channel,
        [&](uint64_t k) {
          auto [src, dst] = ends((k % slots) * program->bytes);
          return ChannelRequest{program, src, dst};
        },
        program->bytes, slice, nullptr, min_requests);
  };
  GpuCurves out;
  const uint64_t request_cap =
      channel.caps().request_bytes > 0 ? channel.caps().request_bytes : kGatherBytes;
  ISO_ASSIGN_OR_RETURN(
      out.contiguous, MeasureSizes(ContiguousCalibrationSizes(), 0, budget / 2,
                                   [&](uint64_t size, Clock::duration slice) {
                                     const uint64_t request = std::min(size, request_cap);
                                     return time(ContiguousProgram(request), slice, size / request);
                                   }));
  std::vector<uint64_t> runs;
  for (uint64_t r = 1; r <= (64ull << 10); r *= 4) runs.push_back(r);
  ISO_ASSIGN_OR_RETURN(out.runs, MeasureSizes(runs, kGatherBytes, budget / 2,
                                              [&](uint64_t run, Clock::duration slice) {
                                                return time(Runs(run, 2), slice, 2);
                                              }));
  return out;
}

}  // namespace isometry
