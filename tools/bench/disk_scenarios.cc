#include "tools/bench/disk_scenarios.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>

#include "channels/disk/disk_channel.h"
#include "tools/bench/host_buffer.h"

namespace isometry::bench {

namespace {

using Clock = std::chrono::steady_clock;
constexpr uint64_t kRun = 1ull << 20;      // bytes per run, like fio's bs=1M
constexpr uint64_t kRequest = 4ull << 20;  // the channel's request_bytes
constexpr int kRepeat = 5;

struct FioResult {
  bool ok = false;
  double bytes_per_s = 0;
  std::string detail;  // the command, or why it failed
};

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

FioResult RunFio(const std::string& file, bool write, uint64_t bytes, unsigned depth) {
  const std::string rw = write ? "write" : "read";
  const std::string cmd =
      StrCat("fio --name=x --filename=", ShellQuote(file), " --rw=", rw, " --bs=1M --size=", bytes,
             " --ioengine=io_uring --direct=1 --iodepth=", depth, " --output-format=json");
  FILE* pipe = ::popen(("timeout 300 " + cmd + " 2>&1").c_str(), "r");
  if (!pipe) return {false, 0, "cannot start fio"};
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = ::pclose(pipe);
  if (status != 0) {
    return {false, 0,
            StrCat("'", cmd, "' failed (status ", status,
                   "): ", out.substr(out.size() - std::min<size_t>(out.size(), 200)))};
  }
  // jobs[0].<rw>.bw_bytes, without a JSON library.
  const size_t section = out.find("\"" + rw + "\" : {");
  const size_t key = section == std::string::npos ? section : out.find("\"bw_bytes\" : ", section);
  if (key == std::string::npos) return {false, 0, "no bw_bytes in fio's output"};
  return {true, std::strtod(out.c_str() + key + 13, nullptr), cmd};
}

// Moves `bytes` between `host` (cycled) and the file with requests of four
// 1 MiB runs, max_in_flight at a time. Returns seconds, or nullopt after
// printing the failure.
std::optional<double> RunChannel(Channel& channel, bool write, const FileRef& file, uint64_t bytes,
                                 const HostBuffer& host) {
  std::mutex mu;
  std::condition_variable cv;
  int in_flight = 0;
  Status failure;
  const int depth = std::max(1, channel.caps().max_in_flight);
  const auto t0 = Clock::now();
  std::unique_lock lock(mu);
  for (uint64_t off = 0; off < bytes && failure.ok(); off += kRequest) {
    const uint64_t runs = std::min(kRequest, bytes - off) / kRun;
    auto program = std::make_shared<CopyProgram>();
    CopyOp op;
    op.run_bytes = kRun;
    op.num_loops = 1;
    op.loops[0] = {runs, kRun, kRun};
    program->ops.push_back(op);
    program->bytes = runs * kRun;
    program->runs = runs;
    std::byte* mem = host.data() + off % host.size();
    FileRef ref = file;
    ref.offset = off;
    ChannelRequest req{.program = std::move(program)};
    if (write) {
      req.src = mem;
      req.dst_file = ref;
    } else {
      req.dst = mem;
      req.src_file = ref;
    }
    cv.wait(lock, [&] { return in_flight < depth; });
    ++in_flight;
    lock.unlock();
    channel.Submit(std::move(req), [&](Status s) {
      std::lock_guard l(mu);
      --in_flight;
      if (!s.ok() && failure.ok()) failure = s;
      cv.notify_all();
    });
    lock.lock();
  }
  cv.wait(lock, [&] { return in_flight == 0; });
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  if (!failure.ok()) {
    std::fprintf(stderr, "disk bench: %s\n", failure.ToString().c_str());
    return std::nullopt;
  }
  return seconds;
}

std::unique_ptr<Channel> MakeOrDie(ChannelKind kind, const char* name) {
  ChannelConfig c;
  c.name = name;
  c.kind = kind;
  c.request_bytes = kRequest;
  auto ch = MakeDiskChannel(c);
  if (!ch.ok()) {
    std::fprintf(stderr, "disk bench: %s\n", ch.status().ToString().c_str());
    std::exit(1);
  }
  std::fprintf(stderr, "  %s\n", DescribeDiskChannel(**ch).c_str());
  return *std::move(ch);
}

}  // namespace

void RunDisk(const std::string& dir, uint64_t bytes, Report& report) {
  bytes = std::max(kRun, bytes / kRun * kRun);
  const std::string path = StrCat(dir, "/isometry-bench-disk-", ::getpid(), ".bin");
  auto writer = MakeOrDie(ChannelKind::kDiskWrite, "dsk_w");
  auto reader = MakeOrDie(ChannelKind::kDiskRead, "dsk_r");
  // Host memory like fio's: one buffer per request in flight, reused (fio
  // allocates iodepth x bs). Cycling through a larger buffer measures the
  // host's page pinning and TLB as much as the disk: 64 MiB cost ~15% on
  // the development VM.
  const uint64_t host_bytes =
      static_cast<uint64_t>(std::max(1, writer->caps().max_in_flight)) * kRequest;
  const HostBuffer host(std::min(bytes, host_bytes), 7);
  const unsigned depth = kDefaultQueueDepth;  // fio gets the channel's queue depth

  double ours[2] = {1e300, 1e300};  // seconds: write, read
  FioResult fio[2];
  bool direct = true;
  // Each round: the channels write a fresh file and read it back, and fio
  // does the same, in alternating order (the disk is shared and noisy; the
  // best round of each is kept).
  auto channels = [&]() -> bool {
    ::unlink(path.c_str());
    for (const bool write : {true, false}) {
      auto file = DiskFile::Open(path, write ? DiskFile::Mode::kWrite : DiskFile::Mode::kRead);
      if (!file.ok()) {
        std::fprintf(stderr, "disk bench: %s\n", file.status().ToString().c_str());
        return false;
      }
      direct = direct && file->direct_fd() >= 0;
      const auto s = RunChannel(write ? *writer : *reader, write, file->Ref(), bytes, host);
      if (!s) return false;
      ours[!write] = std::min(ours[!write], *s);
    }
    return true;
  };
  auto with_fio = [&] {
    ::unlink(path.c_str());
    for (const bool write : {true, false}) {
      const FioResult f = RunFio(path, write, bytes, depth);
      if (f.ok && (!fio[!write].ok || f.bytes_per_s > fio[!write].bytes_per_s)) fio[!write] = f;
      if (!f.ok && !fio[!write].ok) fio[!write] = f;
    }
  };
  for (int rep = 0; rep < kRepeat; ++rep) {
    if (rep % 2) with_fio();
    if (!channels()) {
      ::unlink(path.c_str());
      return;
    }
    if (rep % 2 == 0) with_fio();
  }
  ::unlink(path.c_str());

  for (const bool write : {true, false}) {
    const std::string name = write ? "disk_write_1MiB" : "disk_read_1MiB";
    const double gbps = static_cast<double>(bytes) / ours[!write] / 1e9;
    const FioResult& f = fio[!write];
    if (!f.ok) {
      std::fprintf(stderr, "  fio unavailable: %s\n", f.detail.c_str());
      report.Add({name, "throughput", gbps, "GB/s", "fio unavailable", 0, 0, ""});
      continue;
    }
    const std::string baseline =
        StrCat("fio io_uring ", write ? "write" : "read", " QD", depth, direct ? " direct" : "");
    report.Add({name, "throughput", gbps, "GB/s", baseline, f.bytes_per_s / 1e9,
                gbps / (f.bytes_per_s / 1e9), ">= 0.9"});
  }
  if (!direct)
    std::fprintf(stderr, "  note: %s has no O_DIRECT; the channel used the page cache\n",
                 dir.c_str());
}

}  // namespace isometry::bench
