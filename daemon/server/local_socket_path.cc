// The local socket's file: its directory, a stale socket removed, its
// mode and group (the gRPC socket shares the last two), and who is on the
// other end of a connection beyond SO_PEERCRED. Apart from local_server.cc,
// which serves the connections.
#include <grp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <vector>

#include "core/group.h"
#include "core/strings.h"
#include "core/unique_fd.h"
#include "daemon/server/local_server.h"

namespace isometry {

namespace {

Status PathErrno(const std::string& what) { return Internal(what, ": ", ErrnoString(errno)); }

}  // namespace

Status PrepareSocketPath(const std::string& path) {
  std::error_code ec;
  const auto dir = std::filesystem::path(path).parent_path();
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  if (ec) return Internal("cannot create directory ", dir.string(), ": ", ec.message());
  ::unlink(path.c_str());  // a stale socket from a previous run
  return OkStatus();
}

Status ApplySocketPermissions(const std::string& path, uint32_t mode, const std::string& group) {
  if (chmod(path.c_str(), mode) != 0) return PathErrno("chmod " + path);
  if (!group.empty()) {
    const std::optional<gid_t> gid = GroupIdOf(group);
    if (!gid) return NotFound("socket group '", group, "' does not exist");
    if (chown(path.c_str(), static_cast<uid_t>(-1), *gid) != 0) return PathErrno("chown " + path);
  }
  return OkStatus();
}

Result<int> ListenUnix(const std::string& path, uint32_t mode, const std::string& group) {
  sockaddr_un addr{};
  if (path.size() >= sizeof addr.sun_path) {
    return InvalidArgument("socket path '", path, "' is longer than ", sizeof addr.sun_path - 1,
                           " bytes");
  }
  ISO_RETURN_IF_ERROR(PrepareSocketPath(path));
  UniqueFd fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return PathErrno("socket");
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  if (bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    return PathErrno("bind " + path);
  }
  ISO_RETURN_IF_ERROR(ApplySocketPermissions(path, mode, group));
  if (listen(fd.get(), 128) != 0) return PathErrno("listen " + path);
  return fd.release();
}

std::vector<gid_t> PeerGroups(int fd) {
  std::vector<gid_t> groups(64);
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto len = static_cast<socklen_t>(groups.size() * sizeof(gid_t));
    if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups.data(), &len) == 0) {
      groups.resize(len / sizeof(gid_t));
      return groups;
    }
    if (errno != ERANGE) break;
    groups.resize(len / sizeof(gid_t));  // the kernel said how many
  }
  return {};
}

}  // namespace isometry
