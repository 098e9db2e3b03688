#include "daemon/cluster/secret.h"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "core/strings.h"

namespace isometry {

Result<std::string> LoadSecret(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return NotFound("cluster secret file '", path, "' cannot be read: ", ErrnoString(errno));
  }
  std::stringstream ss;
  ss << in.rdbuf();
  std::string secret = ss.str();
  while (!secret.empty() && (secret.back() == '\n' || secret.back() == '\r')) secret.pop_back();
  if (secret.size() < 16) {
    return InvalidArgument("cluster secret in '", path, "' has ", secret.size(),
                           " bytes; use at least 16 (e.g. `head -c 32 /dev/urandom | base64`)");
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0 && (st.st_mode & 0077)) {
    spdlog::warn(
        "cluster secret file '{}' is readable by group or others (mode {:o}); "
        "chmod 600 it",
        path, st.st_mode & 0777);
  }
  return secret;
}

std::string Hmac(std::string_view secret, const std::vector<std::string>& parts) {
  std::string msg;
  for (const std::string& p : parts) {
    msg += p;
    msg += '\x1f';
  }
  unsigned char out[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), secret.data(), static_cast<int>(secret.size()),
       reinterpret_cast<const unsigned char*>(msg.data()), msg.size(), out, &len);
  return std::string(reinterpret_cast<const char*>(out), len);
}

}  // namespace isometry
