#include "tools/isoctl/operator_token.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/strings.h"
#include "core/unique_fd.h"
#include "tools/isoctl/exit_codes.h"

namespace isometry::isoctl {

Result<std::string> ReadOperatorToken(const std::string& path, bool named) {
  if (path.empty()) {
    return std::string();
  }
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  int err = fd.valid() ? 0 : errno;
  std::string text;
  if (fd.valid()) {
    char buf[4096];
    ssize_t n = 0;
    while ((n = ::read(fd.get(), buf, sizeof buf)) > 0 && text.size() < 4096) {
      text.append(buf, n);
    }
    if (n < 0) {
      err = errno;
    }
  }
  if (err != 0) {
    if (!named && (err == ENOENT || err == EACCES)) {
      return std::string();
    }
    return UsageError(
        StrCat("cannot read the operator token file '", path, "': ", ErrnoString(err)));
  }
  std::string token = text.substr(0, text.find('\n'));
  if (!token.empty() && token.back() == '\r') {
    token.pop_back();
  }
  if (token.empty()) {
    if (!named) {
      return std::string();  // the daemon is writing it right now
    }
    return UsageError(StrCat("the operator token file '", path, "' holds no token"));
  }
  return token;
}

}  // namespace isometry::isoctl
