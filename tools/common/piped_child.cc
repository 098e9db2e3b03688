#include "tools/common/piped_child.h"

#include <spawn.h>
#include <unistd.h>

#include <cerrno>

#include "core/strings.h"

namespace isometry::tools {

Result<PipedChild> SpawnPiped(const std::vector<std::string>& argv) {
  if (argv.empty()) return InvalidArgument("SpawnPiped: no program");
  int in[2], out[2];
  if (pipe(in) != 0) return Internal("pipe: ", ErrnoString(errno));
  if (pipe(out) != 0) {
    const int e = errno;
    close(in[0]);
    close(in[1]);
    return Internal("pipe: ", ErrnoString(e));
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  posix_spawn_file_actions_addclose(&fa, in[1]);
  posix_spawn_file_actions_addclose(&fa, out[0]);
  PipedChild c;
  const int rc = posix_spawn(&c.pid, argv[0].c_str(), &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(in[0]);
  close(out[1]);
  if (rc != 0) {
    close(in[1]);
    close(out[0]);
    return Unavailable("cannot start ", argv[0], ": ", ErrnoString(rc));
  }
  c.to = in[1];
  c.from = out[0];
  return c;
}

}  // namespace isometry::tools
