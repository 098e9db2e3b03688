// Shell completion scripts for isoctl, generated from its own command
// definitions (so a new subcommand or option completes without anyone
// editing a script): `isoctl completion bash|zsh|fish`. The build writes
// the three into the build folder and `cmake --install` puts them where
// each shell looks.
#pragma once

#include <CLI/CLI.hpp>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace isometry::isoctl {

// The values an option takes, by its long name ("output" -> table, wide,
// json, yaml): completed after the option (and after its short name).
using OptionValues = std::map<std::string, std::vector<std::string>>;

// The script for `shell` (bash, zsh or fish); INVALID_ARGUMENT for others.
Result<std::string> CompletionScript(const CLI::App& app, std::string_view shell,
                                     const OptionValues& values = {});

}  // namespace isometry::isoctl
