// OpenBeneath: names confined to a directory fd with no symbolic links,
// through openat2 and through the component walk used without it.
#include "daemon/runtime/beneath.h"

#include <fcntl.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "unit/temp_dir.h"

namespace isometry {
namespace ISOMETRY_TEST_FILE {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST_CASE("OpenBeneath refuses links and escapes with either resolver") {
  for (const Resolver r : {Resolver::kAuto, Resolver::kWalk}) {
    INFO((r == Resolver::kAuto ? "openat2" : "walk"));
    TempDir dir, outside;
    std::ofstream(outside.path + "/secret") << "secret";
    fs::create_directories(dir.path + "/a/b");
    std::ofstream(dir.path + "/a/b/file") << "inside";
    fs::create_symlink(outside.path, dir.path + "/out");
    fs::create_symlink("a", dir.path + "/alias");        // stays inside
    fs::create_symlink("b/file", dir.path + "/a/link");  // stays inside
    UniqueFd root(::open(dir.path.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
    REQUIRE(root.valid());

    for (const char* ok : {"a/b/file", "./a//b/file", "a/b", "."}) {
      INFO(ok);
      auto fd = OpenBeneath(root.get(), ok, O_PATH, ok, r);
      CHECK(fd.ok());
    }
    struct Case {
      const char* name;
      const char* says;
    };
    for (const Case& c :
         {Case{"out/secret", "symbolic link"}, Case{"alias/b/file", "symbolic link"},
          Case{"a/link", "symbolic link"}, Case{"out", "symbolic link"},
          Case{"../x", "leaves the memory's directory"},
          Case{"a/../../x", "leaves the memory's directory"},
          Case{"/etc/passwd", "leaves the memory's directory"}}) {
      INFO(c.name);
      auto fd = OpenBeneath(root.get(), c.name, O_PATH, c.name, r);
      REQUIRE_FALSE(fd.ok());
      CHECK(absl::IsPermissionDenied(fd.status()));
      CHECK_THAT(std::string(fd.status().message()), Catch::Contains(c.says));
    }
    // O_PATH | O_NOFOLLOW hands back a last component that is a link, for
    // the caller's own message; a link earlier in the name is still refused.
    auto link = OpenBeneath(root.get(), "a/link", O_PATH | O_NOFOLLOW, "a/link", r);
    REQUIRE(link.ok());
    struct stat st {};
    REQUIRE(fstat(link->get(), &st) == 0);
    CHECK(S_ISLNK(st.st_mode));
    CHECK_FALSE(OpenBeneath(root.get(), "out/secret", O_PATH | O_NOFOLLOW, "x", r).ok());
    auto missing = OpenBeneath(root.get(), "a/nothing", O_PATH, "a/nothing", r);
    REQUIRE_FALSE(missing.ok());
    CHECK(absl::IsNotFound(missing.status()));
    // Creating relative to the fd (directories stay put if renamed).
    fs::rename(dir.path + "/a", dir.path + "/moved");
    fs::create_symlink(outside.path, dir.path + "/a");
    CHECK_FALSE(OpenBeneath(root.get(), "a/new", O_CREAT | O_WRONLY, "a/new", r).ok());
    CHECK_FALSE(fs::exists(outside.path + "/new"));
  }
}

}  // namespace
}  // namespace ISOMETRY_TEST_FILE
}  // namespace isometry
