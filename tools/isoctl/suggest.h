// "Did you mean ...?" for a mistyped subcommand or option: after CLI11
// refuses a command line, the nearest known name (by edit distance) to the
// word it could not place.
#pragma once

#include <CLI/CLI.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace isometry::isoctl {

// Edits (insert, delete, substitute, swap two neighbours) from a to b.
size_t EditDistance(std::string_view a, std::string_view b);

// The candidate nearest to `word`, if near enough to be a typo of it: at
// most 2 edits, and fewer than half the word's length.
std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates);

// A line such as "no command 'statsu'; did you mean 'status'?" for the
// first word of argv that
// names no subcommand or option of `app` and is near one; nullopt when
// there is none such.
std::optional<std::string> SuggestionFor(const CLI::App& app, int argc, const char* const* argv);

}  // namespace isometry::isoctl
