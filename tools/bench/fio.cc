#include "tools/bench/fio.h"

#include <cstdio>
#include <cstdlib>

#include "channels/disk/disk_channel.h"
#include "core/strings.h"

namespace isometry::bench {

namespace {

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  }
  return out + "'";
}

}  // namespace

// fio on `file` with the channels' settings. The file is laid out like
// Isometry's: fio's write job sizes a missing file with ftruncate
// (--fallocate=none), as DiskEndpoint::OpenForWrite and the channel rows do,
// so both sides write into the same kind of sparse file. `end_fsync`: fio's
// time includes an fsync at the end, the baseline of a durable write.
FioResult RunFio(const std::string& file, bool write, uint64_t bytes, unsigned depth,
                 bool end_fsync) {
  const std::string rw = write ? "write" : "read";
  const std::string cmd =
      StrCat("fio --name=x --filename=", ShellQuote(file), " --rw=", rw, " --bs=1M --size=", bytes,
             " --ioengine=io_uring --direct=1 --iodepth=", depth, " --fallocate=none",
             end_fsync ? " --end_fsync=1" : "", " --output-format=json");
  FILE* pipe = ::popen(("timeout 300 " + cmd + " 2>&1").c_str(), "r");
  if (!pipe) {
    return {false, 0, "cannot start fio"};
  }
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, pipe)) > 0;) {
    out.append(buf, n);
  }
  const int status = ::pclose(pipe);
  if (status != 0) {
    return {false, 0,
            StrCat("'", cmd, "' failed (status ", status,
                   "): ", out.substr(out.size() - std::min<size_t>(out.size(), 200)))};
  }
  // jobs[0].<rw>.bw_bytes, without a JSON library.
  const size_t section = out.find("\"" + rw + "\" : {");
  const size_t key = section == std::string::npos ? section : out.find("\"bw_bytes\" : ", section);
  if (key == std::string::npos) {
    return {false, 0, "no bw_bytes in fio's output"};
  }
  return {true, std::strtod(out.c_str() + key + 13, nullptr), cmd};
}

void KeepBest(FioResult& best, const FioResult& f) {
  if (f.ok && (!best.ok || f.bytes_per_s > best.bytes_per_s)) {
    best = f;
  }
  if (!f.ok && !best.ok) {
    best = f;
  }
}

std::string FioBaseline(bool write, bool direct, bool end_fsync) {
  return StrCat("fio io_uring ", write ? "write" : "read", " QD", kDefaultQueueDepth,
                direct ? " direct" : "", end_fsync ? " +fsync" : "");
}

}  // namespace isometry::bench
