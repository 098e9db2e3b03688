#include "core/thread_name.h"

#include <pthread.h>

#include <algorithm>
#include <cstring>

namespace isometry {

void NameThisThread(std::string_view name) {
  // The kernel keeps 16 bytes with the terminating NUL, and refuses a
  // longer name outright rather than cutting it.
  char buf[16] = {};
  std::memcpy(buf, name.data(), std::min(name.size(), sizeof buf - 1));
  (void)pthread_setname_np(pthread_self(), buf);
}

}  // namespace isometry
