#include "net/rdma/verbs.h"

#include <sys/resource.h>

#include <cerrno>
#include <cstdio>

#include "core/strings.h"

namespace isometry::rdma {
namespace {

struct FreeDeviceList {
  void operator()(ibv_device** list) const { ibv_free_device_list(list); }
};

std::string Hex(uint64_t v) {
  char out[24];
  std::snprintf(out, sizeof out, "0x%llx", static_cast<unsigned long long>(v));
  return out;
}

std::string MemlockLimit() {
  rlimit r{};
  if (getrlimit(RLIMIT_MEMLOCK, &r) != 0) return "unknown";
  return r.rlim_cur == RLIM_INFINITY ? "unlimited" : StrCat(r.rlim_cur, " bytes");
}

}  // namespace

Result<OpenDevice> Open(std::string_view name) {
  int n = 0;
  std::unique_ptr<ibv_device*, FreeDeviceList> list(ibv_get_device_list(&n));
  if (!list) {
    return absl::UnavailableError(
        StrCat("RDMA device '", name, "': ibv_get_device_list failed: ", ErrnoString(errno)));
  }
  for (int i = 0; i < n; ++i) {
    if (name != ibv_get_device_name(list.get()[i])) continue;
    OpenDevice d;
    d.name = std::string(name);
    d.context.reset(ibv_open_device(list.get()[i]));
    if (!d.context) {
      return absl::UnavailableError(
          StrCat("RDMA device '", name, "': ibv_open_device failed: ", ErrnoString(errno)));
    }
    d.pd.reset(ibv_alloc_pd(d.context.get()));
    if (!d.pd) {
      return absl::UnavailableError(
          StrCat("RDMA device '", name, "': ibv_alloc_pd failed: ", ErrnoString(errno)));
    }
    return d;
  }
  return NotFound("RDMA device '", name, "' not found (", n, " device(s) present)");
}

Registrar VerbsRegistrar(ibv_pd* pd) {
  Registrar r;
  r.reg = [pd](uint64_t addr, uint64_t length) -> Result<Registration> {
    constexpr int kAccess =
        IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ;
    // NOLINTNEXTLINE(performance-no-int-to-ptr): the cache keeps addresses as integers
    ibv_mr* mr = ibv_reg_mr(pd, reinterpret_cast<void*>(addr), length, kAccess);
    if (!mr) {
      const int err = errno;
      return absl::ResourceExhaustedError(
          StrCat("ibv_reg_mr of ", length, " bytes at ", Hex(addr), ": ", ErrnoString(err),
                 err == ENOMEM || err == EPERM ? StrCat(" (RLIMIT_MEMLOCK is ", MemlockLimit(),
                                                        "; raise LimitMEMLOCK= for the service)")
                                               : ""));
    }
    return Registration{addr, length, mr->lkey, mr->rkey, mr};
  };
  r.dereg = [](const Registration& reg) { ibv_dereg_mr(static_cast<ibv_mr*>(reg.handle)); };
  return r;
}

}  // namespace isometry::rdma
