#include "daemon/cpu_latency.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "config/config_origin.h"
#include "core/strings.h"

namespace isometry {

namespace {

constexpr char kKey[] = "daemon.cpu_latency_us";

Status OpenError(const std::string& device, int err) {
  if (err == EACCES || err == EPERM) {
    return ConfigKeyError(kKey, "cannot open ", device, " for writing: ", ErrnoString(err),
                          " (it is root's, mode 0600: run the daemon as root, give its group "
                          "write access with a udev rule, or leave the key out)");
  }
  return ConfigKeyError(kKey, "cannot open ", device, ": ", ErrnoString(err),
                        " (a kernel without CPU PM QoS: leave the key out)");
}

}  // namespace

Result<UniqueFd> HoldCpuLatency(uint32_t us, const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_WRONLY | O_CLOEXEC));
  if (!fd.valid()) return OpenError(device, errno);
  // The interface takes the value as a binary 32-bit integer.
  const auto value = static_cast<int32_t>(us);
  if (::write(fd.get(), &value, sizeof value) != static_cast<ssize_t>(sizeof value)) {
    return ConfigKeyError(kKey, "writing ", us, " to ", device, ": ", ErrnoString(errno));
  }
  return fd;
}

Status CheckCpuLatencyDevice(const std::string& device) {
  if (::euidaccess(device.c_str(), W_OK) != 0) return OpenError(device, errno);
  return OkStatus();
}

Result<int32_t> CurrentCpuLatency(const std::string& device) {
  UniqueFd fd(::open(device.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return Internal("cannot open ", device, ": ", ErrnoString(errno));
  int32_t value = 0;
  if (::read(fd.get(), &value, sizeof value) != static_cast<ssize_t>(sizeof value)) {
    return Internal("cannot read ", device, ": ", ErrnoString(errno));
  }
  return value;
}

}  // namespace isometry
