// DiskRead / DiskWrite channels on real files: round trips of odd sizes at
// odd offsets through the O_DIRECT and the buffered paths, layout changes
// between disk and memory, concurrency and the shared staging pool.
// Failures (injected errors, ENOSPC, short files, permissions) are in
// disk_channel_faults_test.cc.
#include "channels/disk/disk_channel.h"

#include <fcntl.h>
#include <liburing.h>
#include <sys/fsuid.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <future>
#include <mutex>
#include <random>
#include <thread>

#include "channels/channel_factory.h"
#include "channels/disk/disk_file.h"
#include "channels/disk/uring.h"
#include "core/strings.h"
#include "layout/compiler.h"
#include "unit/disk_test_support.h"
#include "unit/skip.h"
#include "unit/temp_dir.h"
#include "unit/test_util.h"

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::testing;
using namespace std::chrono_literals;

namespace fs = std::filesystem;

TEST_CASE("a ring is probed, described, registered and moved") {
  for (const bool coop : {true, false}) {
    auto ring = Uring::Create({.entries = 4, .coop_taskrun = coop});
    INFO(ring.status().ToString());
    REQUIRE(ring.ok());
    const UringInfo& info = ring->info();
    CHECK(info.sq_entries >= 4);
    CHECK(info.cq_entries >= 2 * info.sq_entries);
    CHECK(info.read_write);
    if (!coop) CHECK_FALSE(info.coop_taskrun);
    std::vector<std::byte> buf(8192);
    const Status reg = ring->RegisterBuffer(buf.data(), buf.size());
    CHECK(reg.ok() == ring->info().registered_buffer);
    const Status files = ring->RegisterFileTable(8);
    CHECK(files.ok() == ring->info().registered_files);
    CHECK(ring->info().Describe().find(StrCat("io_uring sq=", info.sq_entries)) == 0);
    Uring moved = *std::move(ring);
    CHECK(ring->get() == nullptr);  // NOLINT(bugprone-use-after-move): moved-from is empty
    CHECK(moved.get() != nullptr);
    io_uring_sqe* sqe = moved.GetSqe();
    REQUIRE(sqe != nullptr);
    io_uring_prep_nop(sqe);
    io_uring_sqe_set_data64(sqe, 42);
    CHECK(moved.SubmitAndWait(1).ok());
    io_uring_cqe* cqe = moved.PeekCqe();
    REQUIRE(cqe != nullptr);
    CHECK(cqe->user_data == 42);
    moved.MarkSeen(cqe);
    CHECK(moved.PeekCqe() == nullptr);
  }
}

TEST_CASE("disk channels come from the factory and describe themselves") {
  ChannelConfig c;
  c.name = "dsk_r";
  c.kind = ChannelKind::kDiskRead;
  auto r = MakeChannel(c);
  INFO(r.status().ToString());
  REQUIRE(r.ok());
  const ChannelCaps& caps = (*r)->caps();
  CHECK(caps.kind == ChannelKind::kDiskRead);
  CHECK_FALSE(caps.converts_layout);
  CHECK_FALSE(caps.streams_stores);
  CHECK(caps.request_bytes == 4ull << 20);
  CHECK(caps.max_in_flight >= 2);
  REQUIRE(caps.memory_kinds.size() == 3);
  for (auto [from, to] : caps.memory_kinds) {
    CHECK(from == MemoryKind::kDsk);
    CHECK(IsHostMemory(to));
  }
  const std::string d = DescribeDiskChannel(**r);
  if (std::getenv("ISOMETRY_TEST_VERBOSE")) WARN(d);
  INFO(d);
  CHECK(d.find("disk_read 'dsk_r': io_uring") == 0);
  CHECK(d.find("queue depth 8") != std::string::npos);

  c.kind = ChannelKind::kDiskWrite;
  auto w = MakeChannel(c);
  REQUIRE(w.ok());
  CHECK((*w)->caps().memory_kinds.front() == std::make_pair(MemoryKind::kSys, MemoryKind::kDsk));

  c.kind = ChannelKind::kMemcpy;
  CHECK(MakeDiskChannel(c).status().code() == absl::StatusCode::kInvalidArgument);
  auto memcpy_channel = MakeChannel(c);
  REQUIRE(memcpy_channel.ok());
  CHECK(DescribeDiskChannel(**memcpy_channel).empty());
}

TEST_CASE("contiguous round trips of odd sizes at odd offsets, direct and buffered") {
  TempDir dir;
  IoLog log;
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w", {.io_hook = log.Hook()});
  auto r = MakeDisk(ChannelKind::kDiskRead, "r", {.io_hook = log.Hook()});
  const std::string path = dir.File("contig.bin");
  uint64_t seed = 1;
  for (const bool use_direct : {true, false}) {
    for (const uint64_t size :
         {1ull, 100ull, 4095ull, 4096ull, 4097ull, 65536ull + 123, (3ull << 20) + 17}) {
      for (const uint64_t offset : {0ull, 512ull, 4096ull, 3 * 4096ull + 1}) {
        for (const size_t misalign : {size_t{0}, size_t{8}}) {
          DYNAMIC_SECTION("direct " << use_direct << " size " << size << " offset " << offset
                                    << " host misaligned by " << misalign) {
            auto file = DiskFile::Open(path, DiskFile::Mode::kUpdate);
            REQUIRE(file.ok());
            FileRange ref = file->Ref(offset);
            if (!use_direct) ref.direct_fd = -1;
            const auto data = Pattern(size, ++seed);
            HostBuffer src(size, misalign), dst(size, misalign);
            src.Fill(data);
            log.direct = log.buffered = 0;
            REQUIRE(Write(*w, ref, src.data(), ContiguousProgram(size)).ok());
            CHECK(ReadAt(path, offset, size) == data);
            REQUIRE(Read(*r, ref, dst.data(), ContiguousProgram(size)).ok());
            CHECK(dst.Vector() == data);
            const bool has_block = (offset + size) / 4096 > (offset + 4095) / 4096;
            if (!use_direct || file->direct_fd() < 0) {
              CHECK(log.direct == 0);
            } else if (has_block) {
              CHECK(log.direct > 0);  // aligned bodies really took O_DIRECT (bounced if misaligned)
            }
          }
        }
      }
    }
  }
}

TEST_CASE("AOS on disk <-> SOA in memory, whole instances and sub-boxes") {
  TempDir dir;
  IoLog log;
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w", {.io_hook = log.Hook()});
  auto r = MakeDisk(ChannelKind::kDiskRead, "r", {.io_hook = log.Hook()});
  auto fields = FieldSpace::Make({{"a", 4}, {"b", 8}, {"c", 3}});
  REQUIRE(fields.ok());
  struct Case {
    const char* name;
    Box bounds, box;
    bool staged;  // dense small runs: a few large I/Os, not one per run
  };
  const Box b1 = Box::FromExtents({10007});
  const Box b2 = Box::FromExtents({120, 90});
  Box sub1 = b1, slab_a = b2, slab_b = b2, inner = b2;
  sub1.lo[0] = 100, sub1.hi[0] = 5000;
  slab_a.hi[0] = 3;  // thin in dimension 0
  slab_b.hi[1] = 2;  // thin in dimension 1
  inner.lo = {3, 5, 0, 0}, inner.hi = {40, 45, 0, 0};
  for (const Case& c :
       {Case{"whole 1-d", b1, b1, true}, Case{"1-d sub-box", b1, sub1, true},
        Case{"2-d whole", b2, b2, true}, Case{"2-d slab a", b2, slab_a, false},
        Case{"2-d slab b", b2, slab_b, false}, Case{"2-d inner box", b2, inner, false}}) {
    for (const uint64_t offset : {0ull, 777ull}) {
      for (const bool use_direct : {true, false}) {
        DYNAMIC_SECTION(c.name << " at file offset " << offset << ", direct " << use_direct) {
          const InstanceShape aos{c.bounds, *fields, Layout::Aos(c.bounds.dims)};
          const InstanceShape soa{c.bounds, *fields, Layout::Soa(c.bounds.dims)};
          const std::string path = dir.File("aos.bin");
          auto opened = DiskFile::Open(path, DiskFile::Mode::kUpdate);
          REQUIRE(opened.ok());
          auto ref = [&](uint64_t off) {
            FileRange f = opened->Ref(off);
            if (!use_direct) f.direct_fd = -1;
            return f;
          };
          // Disk (AOS) -> memory (SOA).
          const auto on_disk = Pattern(aos.total_bytes(), 11);
          WriteAt(path, on_disk, offset);
          const auto mem_before = Pattern(soa.total_bytes(), 12);
          HostBuffer mem(soa.total_bytes());
          mem.Fill(mem_before);
          REQUIRE(Read(*r, ref(offset), mem.data(), Compile(aos, soa, c.box)).ok());
          CHECK(CheckCopy(aos, on_disk, soa, mem.Vector(), mem_before, c.box) == "");
          // Memory (SOA) -> disk (AOS): bytes outside the box stay as they were.
          const auto src = Pattern(soa.total_bytes(), 13);
          HostBuffer host(soa.total_bytes());
          host.Fill(src);
          REQUIRE(Write(*w, ref(offset), host.data(), Compile(soa, aos, c.box)).ok());
          CHECK(CheckCopy(soa, src, aos, ReadAt(path, offset, aos.total_bytes()), on_disk, c.box) ==
                "");
          if (c.staged) {
            CHECK((log.direct > 0) == use_direct);
            CHECK(log.direct + log.buffered <= 8);
          }
        }
      }
    }
  }
}

TEST_CASE("concurrent readers and writers on different files") {
  TempDir dir;
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w");
  auto r = MakeDisk(ChannelKind::kDiskRead, "r");
  constexpr int kThreads = 4;
  std::vector<std::thread> threads;
  threads.reserve(kThreads);
  std::mutex mu;
  std::vector<std::string> failures;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(t);
      auto file = DiskFile::Open(dir.File(StrCat("f", t)), DiskFile::Mode::kUpdate);
      for (int i = 0; i < 12 && file.ok(); ++i) {
        const uint64_t size = 1 + rng() % (3ull << 20);
        const uint64_t offset = rng() % 3 == 0 ? 4096 * (rng() % 8) : rng() % 10000;
        const auto data = Pattern(size, rng());
        HostBuffer src(size, rng() % 2 * 16), dst(size);
        src.Fill(data);
        Status s = Write(*w, file->Ref(offset), src.data(), ContiguousProgram(size));
        if (s.ok()) s = Read(*r, file->Ref(offset), dst.data(), ContiguousProgram(size));
        std::lock_guard lock(mu);
        if (!s.ok()) failures.push_back(s.ToString());
        if (s.ok() && dst.Vector() != data) {
          failures.push_back(StrCat("thread ", t, " round ", i, " differs"));
        }
      }
      if (!file.ok()) failures.push_back(file.status().ToString());
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failures.empty());
  for (const std::string& f : failures) WARN(f);

  // Several requests in flight on one channel at once, each on its own file.
  constexpr int kFiles = 8;
  std::vector<DiskFile> files;
  std::vector<HostBuffer> bufs;
  std::vector<std::vector<std::byte>> data;
  for (int i = 0; i < kFiles; ++i) {
    auto f = DiskFile::Open(dir.File(StrCat("burst", i)), DiskFile::Mode::kUpdate);
    REQUIRE(f.ok());
    files.push_back(*std::move(f));
    data.push_back(Pattern((1ull << 20) + 4096ull * i + i, 100 + i));
    bufs.emplace_back(data.back().size());
    bufs.back().Fill(data.back());
  }
  std::vector<std::future<Status>> results;
  for (int i = 0; i < kFiles; ++i) {
    auto p = std::make_shared<std::promise<Status>>();
    results.push_back(p->get_future());
    w->Submit({.program = ContiguousProgram(data[i].size()),
               .src = HostBytes{bufs[i].data()},
               .dst = files[i].Ref(i)},
              [p](Status s) { p->set_value(std::move(s)); });
  }
  for (auto& f : results) CHECK(f.get().ok());
  for (int i = 0; i < kFiles; ++i) CHECK(ReadAt(files[i].path(), i, data[i].size()) == data[i]);
}

TEST_CASE("bounced and staged requests share a small staging pool without deadlock") {
  TempDir dir;
  // 1 MiB of staging, 256 KiB I/Os: staged requests take most of it, and
  // bounced I/Os need chunks of it, from four threads at once.
  const DiskChannelOptions options{.max_io_bytes = 256 << 10, .staging_bytes = 1 << 20};
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w", options);
  auto r = MakeDisk(ChannelKind::kDiskRead, "r", options);
  const InstanceShape aos{Box::FromExtents({40000}), FieldSpace::Uniform(6, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  const auto to_disk = Compile(soa, aos, aos.bounds), from_disk = Compile(aos, soa, aos.bounds);
  std::mutex mu;
  std::vector<std::string> failures;
  std::vector<std::thread> threads;
  threads.reserve(4);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      auto file = DiskFile::Open(dir.File(StrCat("p", t)), DiskFile::Mode::kUpdate);
      std::string err = file.ok() ? "" : file.status().ToString();
      for (int i = 0; i < 6 && err.empty(); ++i) {
        const auto soa_data = Pattern(soa.total_bytes(), 10 * t + i);
        HostBuffer soa_src(soa.total_bytes()), soa_back(soa.total_bytes());
        soa_src.Fill(soa_data);
        const uint64_t size = (3ull << 19) + 7;  // 1.5 MiB: six bounced body pieces
        const auto data = Pattern(size, 100 * t + i);
        HostBuffer src(size, 40), back(size, 8);
        src.Fill(data);
        const uint64_t far = 1 << 21;  // the raw bytes live after the AOS instance
        Status s = Write(*w, file->Ref(4096), soa_src.data(), to_disk);
        if (s.ok()) s = Write(*w, file->Ref(far), src.data(), ContiguousProgram(size));
        if (s.ok()) s = Read(*r, file->Ref(4096), soa_back.data(), from_disk);
        if (s.ok()) s = Read(*r, file->Ref(far), back.data(), ContiguousProgram(size));
        if (!s.ok()) {
          err = s.ToString();
        } else if (soa_back.Vector() != soa_data || back.Vector() != data) {
          err = "data differs";
        }
      }
      std::lock_guard lock(mu);
      if (!err.empty()) failures.push_back(StrCat("thread ", t, ": ", err));
    });
  }
  for (std::thread& t : threads) t.join();
  CHECK(failures.empty());
  for (const std::string& f : failures) WARN(f);
}

// Issue #21, item 1: a request waiting for staging memory was left asleep
// when the request holding that memory finished (staging was freed after
// the worker had tried to start pending requests, and nothing woke it).
// Two staged reads that each need more than half of the staging, submitted
// back to back, with nothing else on the channel.
TEST_CASE("a request waiting for staging starts when the request before it frees it") {
  TempDir dir;
  // 640 KiB of 4-byte runs each way: staged (small runs, dense in the file).
  const InstanceShape aos{Box::FromExtents({40960}), FieldSpace::Uniform(4, 4), Layout::Aos(1)};
  const InstanceShape soa{aos.bounds, aos.fields, Layout::Soa(1)};
  const auto from_disk = Compile(aos, soa, aos.bounds);
  const std::string path = dir.File("staged");
  const auto data = Pattern(aos.total_bytes(), 7);
  WriteAt(path, data, 0);
  auto file = DiskFile::Open(path, DiskFile::Mode::kRead);
  REQUIRE(file.ok());
  // Declared before the channel, so a failed wait below still outlives it.
  HostBuffer a(soa.total_bytes()), b(soa.total_bytes());
  const DiskChannelOptions options{.max_io_bytes = 256 << 10, .staging_bytes = 1 << 20};
  auto r = MakeDisk(ChannelKind::kDiskRead, "r", options);
  for (int round = 0; round < 20; ++round) {
    auto pa = std::make_shared<std::promise<Status>>(),
         pb = std::make_shared<std::promise<Status>>();
    auto fa = pa->get_future(), fb = pb->get_future();
    r->Submit({.program = from_disk, .src = file->Ref(0), .dst = HostBytes{a.data()}},
              [pa](Status s) { pa->set_value(std::move(s)); });
    r->Submit({.program = from_disk, .src = file->Ref(0), .dst = HostBytes{b.data()}},
              [pb](Status s) { pb->set_value(std::move(s)); });
    INFO("round " << round);
    REQUIRE(fa.wait_for(10s) == std::future_status::ready);
    REQUIRE(fb.wait_for(10s) == std::future_status::ready);
    CHECK(fa.get().ok());
    CHECK(fb.get().ok());
    const std::vector<std::byte> untouched(soa.total_bytes());
    CHECK(CheckCopy(aos, data, soa, a.Vector(), untouched, aos.bounds) == "");
    CHECK(CheckCopy(aos, data, soa, b.Vector(), untouched, aos.bounds) == "");
  }
}

// Issue #21: programs of some blocked layouts walk backwards (a negative
// stride, stored wrapped); the channel took their reach for a huge file
// offset and refused them ("reaches past the largest file offset").
TEST_CASE("a sub-box of a blocked layout whose program walks backwards round-trips") {
  TempDir dir;
  auto w = MakeDisk(ChannelKind::kDiskWrite, "w");
  auto r = MakeDisk(ChannelKind::kDiskRead, "r");
  Box bounds, box;
  bounds.dims = box.dims = 3;
  bounds.lo = {-2, 2, 3, 0};
  bounds.hi = {-1, 9, 12, 1};
  box.lo = {-2, 2, 4, 0};
  box.hi = {-1, 8, 12, 1};
  const Layout blocked = *Layout::Parse("z_out,y_out,y_in=4,F,z_in=2,x", 3);
  const InstanceShape file_shape{bounds, FieldSpace::Uniform(1, 15), blocked};
  const InstanceShape slot{box, file_shape.fields, blocked};
  const auto to_disk = Compile(slot, file_shape, box), from_disk = Compile(file_shape, slot, box);
  bool backwards = false;
  for (const CopyOp& op : to_disk->ops) {
    for (int l = 0; l < op.num_loops; ++l) {
      backwards |= static_cast<int64_t>(op.loops[l].dst_stride) < 0;
    }
  }
  REQUIRE(backwards);  // the case this test is about
  const std::string path = dir.File("blocked");
  const auto before = Pattern(file_shape.total_bytes() + 100, 1);
  WriteAt(path, before, 0);
  auto file = DiskFile::Open(path, DiskFile::Mode::kUpdate);
  REQUIRE(file.ok());
  const auto data = Pattern(slot.total_bytes(), 2);
  HostBuffer src(slot.total_bytes()), back(slot.total_bytes());
  src.Fill(data);
  const Status written = Write(*w, file->Ref(0), src.data(), to_disk);
  INFO(written.ToString());
  REQUIRE(written.ok());
  const auto after = ReadAt(path, 0, before.size());
  const std::vector<std::byte> old_instance(before.begin(),
                                            before.begin() + file_shape.total_bytes());
  const std::vector<std::byte> new_instance(after.begin(),
                                            after.begin() + file_shape.total_bytes());
  CHECK(CheckCopy(slot, data, file_shape, new_instance, old_instance, box) == "");
  CHECK(std::equal(after.begin() + file_shape.total_bytes(), after.end(),
                   before.begin() + file_shape.total_bytes()));
  REQUIRE(Read(*r, file->Ref(0), back.data(), from_disk).ok());
  CHECK(CheckCopy(slot, data, slot, back.Vector(), back.Vector(), box) == "");  // elements only
}

}  // namespace ISOMETRY_TEST_FILE
