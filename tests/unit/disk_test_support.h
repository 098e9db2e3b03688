// What the disk channel tests share: page-aligned host buffers, whole-file
// reads and writes, running one request and waiting for it, channels made
// with an I/O hook, and the hook that counts and rewrites I/O results.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "channels/disk/disk_channel.h"
#include "layout/compiler.h"

namespace isometry::testing {

// Page-aligned host memory, optionally shifted off alignment.
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes, size_t misalign = 0)
      : storage_(static_cast<std::byte*>(
            std::aligned_alloc(4096, (bytes + misalign + 4096) / 4096 * 4096))),
        data_(storage_.get() + misalign),
        size_(bytes) {}
  std::byte* data() const { return data_; }
  size_t size() const { return size_; }
  void Fill(const std::vector<std::byte>& v) { std::memcpy(data_, v.data(), v.size()); }
  std::vector<std::byte> Vector() const { return {data_, data_ + size_}; }

 private:
  struct Free {
    void operator()(std::byte* p) const { std::free(p); }
  };
  std::unique_ptr<std::byte, Free> storage_;
  std::byte* data_;
  size_t size_;
};

inline void WriteAt(const std::string& path, const std::vector<std::byte>& data, uint64_t offset) {
  const int fd = ::open(path.c_str(), O_CREAT | O_WRONLY, 0644);
  REQUIRE(fd >= 0);
  REQUIRE(::pwrite(fd, data.data(), data.size(), static_cast<off_t>(offset)) ==
          static_cast<ssize_t>(data.size()));
  ::close(fd);
}

inline std::vector<std::byte> ReadAt(const std::string& path, uint64_t offset, uint64_t bytes) {
  std::vector<std::byte> v(bytes);
  const int fd = ::open(path.c_str(), O_RDONLY);
  REQUIRE(fd >= 0);
  REQUIRE(::pread(fd, v.data(), bytes, static_cast<off_t>(offset)) == static_cast<ssize_t>(bytes));
  ::close(fd);
  return v;
}

inline std::shared_ptr<const CopyProgram> Compile(const InstanceShape& s, const InstanceShape& d,
                                                  const Box& box) {
  auto p = CompileCopy(s, d, box);
  REQUIRE(p.ok());
  return std::make_shared<CopyProgram>(*std::move(p));
}

// Runs one request and waits for it (a hung request fails the test).
inline Status Run(Channel& channel, ChannelRequest request) {
  auto promise = std::make_shared<std::promise<Status>>();
  auto future = promise->get_future();
  channel.Submit(std::move(request), [promise](Status s) { promise->set_value(std::move(s)); });
  if (future.wait_for(std::chrono::seconds(30)) != std::future_status::ready) {
    FAIL("request did not complete in 30 s");
  }
  return future.get();
}

inline Status Write(Channel& w, const FileRange& file, std::byte* src,
                    std::shared_ptr<const CopyProgram> p) {
  return Run(w, {.program = std::move(p), .src = HostBytes{src}, .dst = file});
}
inline Status Read(Channel& r, const FileRange& file, std::byte* dst,
                   std::shared_ptr<const CopyProgram> p) {
  return Run(r, {.program = std::move(p), .src = file, .dst = HostBytes{dst}});
}

// Counts I/Os by path and optionally rewrites results: the tests' seam.
struct IoLog {
  std::atomic<int> direct{0}, buffered{0};
  std::atomic<uint64_t> last_sequence{0};
  std::function<int(const DiskIoEvent&)> rewrite;  // set before use, single-threaded tests only
  DiskIoHook Hook() {
    return [this](const DiskIoEvent& e) {
      (e.direct ? direct : buffered)++;
      last_sequence = e.sequence;
      return rewrite ? rewrite(e) : e.result;
    };
  }
};

inline std::unique_ptr<Channel> MakeDisk(ChannelKind kind, const std::string& name,
                                         const DiskChannelOptions& options = {}) {
  ChannelConfig c;
  c.name = name;
  c.kind = kind;
  c.max_in_flight = 8;
  auto ch = MakeDiskChannel(c, options);
  INFO(ch.status().ToString());
  REQUIRE(ch.ok());
  return *std::move(ch);
}

inline std::string Message(const Status& s) { return std::string(s.message()); }

}  // namespace isometry::testing
