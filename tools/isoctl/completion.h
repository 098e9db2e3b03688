// Shell completion scripts for isoctl, generated from its own command
// definitions (so a new subcommand or option completes without anyone
// editing a script): `isoctl completion bash|zsh|fish`. The build writes
// the three into the build folder and `cmake --install` puts them where
// each shell looks.
#pragma once

#include <CLI/CLI.hpp>
#include <string>
#include <string_view>

#include "core/status.h"

namespace isometry::isoctl {

// The script for `shell` (bash, zsh or fish); INVALID_ARGUMENT for others.
Result<std::string> CompletionScript(const CLI::App& app, std::string_view shell);

}  // namespace isometry::isoctl
