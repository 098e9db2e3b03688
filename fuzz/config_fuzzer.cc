// TOML configuration from a string: ParseConfig must accept or reject with
// a message, never crash; an accepted config re-validates.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "config/config_parser.h"

using namespace isometry;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const Result<Config> c = ParseConfig(text, "fuzz.toml");
  if (!c.ok() && c.status().message().empty()) {
    std::abort();
  }
  // What the parser accepted, the runtime's own checks accept too.
  if (c.ok() &&
      (!c->runtime.Validate().ok() || !c->daemon.Validate().ok() || !c->cluster.Validate().ok())) {
    std::abort();
  }
  (void)ParseByteSize(text);
  return 0;
}
