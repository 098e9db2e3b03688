// A scratch directory for tests that touch files, removed with everything
// in it when the test ends.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "core/status.h"

namespace isometry::testing {

// A directory whose file system takes O_DIRECT (/var/tmp first: /tmp may be
// a tmpfs, which refuses O_DIRECT before Linux 6.6), or "" if none does.
inline std::string DirectCapableBase() {
  for (const char* base : {"/var/tmp", "/tmp"}) {
    const std::string probe = StrCat(base, "/isometry-odirect-probe-", ::getpid());
    const int fd = ::open(probe.c_str(), O_CREAT | O_RDWR | O_DIRECT, 0600);
    ::unlink(probe.c_str());
    if (fd >= 0) {
      ::close(fd);
      return base;
    }
  }
  return "";
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string base = DirectCapableBase();
    if (base.empty()) {
      WARN("no O_DIRECT-capable directory: only the buffered path is exercised");
      base = "/tmp";
    }
    std::string tmpl = base + "/isometry-disk-XXXXXX";
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
    ::chmod(tmpl.c_str(), 0755);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string File(const std::string& name) const { return path + "/" + name; }
  // Names of the entries, hidden ones included.
  std::vector<std::string> Files() const {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator(path)) {
      out.push_back(e.path().filename());
    }
    return out;
  }
};

}  // namespace isometry::testing
