// TOML configuration (toml++): parsing, the embedded default, sizes.
#pragma once

#include <string>
#include <string_view>

#include "config/runtime_config.h"

namespace isometry {

// The configuration a node uses when given none: one node with SYS, REG and
// ZCM memories and a Memcpy channel. `isometryd --print-default-config`
// prints exactly this text.
std::string_view EmbeddedDefaultConfig();
// The source name it is parsed under (ConfigOrigin::source).
inline constexpr char kEmbeddedDefaultSource[] = "<embedded default>";

// Parses TOML text. `source` names the file in error messages, which read
// "FILE:LINE: key 'a.b': problem". Unknown keys are errors (typos must not
// be silently ignored).
Result<Config> ParseConfig(std::string_view toml_text, std::string_view source);
Result<Config> LoadConfigFile(const std::string& path);
// The runtime part only (library users without a daemon).
Result<RuntimeConfig> ParseRuntimeConfig(std::string_view toml_text, std::string_view source);

// "4096", "64KiB", "32MiB", "1GiB", "2GB" (decimal), "1.5GiB" to bytes.
Result<uint64_t> ParseByteSize(std::string_view text);

}  // namespace isometry
