#include "tools/isoctl/suggest.h"

#include <algorithm>
#include <numeric>

namespace isometry::isoctl {
namespace {

// Every subcommand name and alias, and every long option ("--name"), of
// `app` and the subcommands below it.
void Collect(const CLI::App& app, std::vector<std::string>& commands,
             std::vector<std::string>& options) {
  for (const CLI::Option* opt : app.get_options()) {
    for (const std::string& name : opt->get_lnames()) {
      options.push_back("--" + name);
    }
  }
  for (const CLI::App* sub : app.get_subcommands([](const CLI::App*) { return true; })) {
    commands.push_back(sub->get_name());
    for (const std::string& alias : sub->get_aliases()) {
      commands.push_back(alias);
    }
    Collect(*sub, commands, options);
  }
}

}  // namespace

size_t EditDistance(std::string_view a, std::string_view b) {
  // Optimal string alignment distance over three rows.
  std::vector<size_t> before(b.size() + 1), prev(b.size() + 1), row(b.size() + 1);
  std::iota(prev.begin(), prev.end(), size_t{0});
  for (size_t i = 1; i <= a.size(); ++i) {
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t cost = a[i - 1] == b[j - 1] ? 0 : 1;
      row[j] = std::min({prev[j] + 1, row[j - 1] + 1, prev[j - 1] + cost});
      if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1]) {
        row[j] = std::min(row[j], before[j - 2] + 1);
      }
    }
    before.swap(prev);
    prev.swap(row);
  }
  return prev[b.size()];
}

std::optional<std::string> Nearest(std::string_view word,
                                   const std::vector<std::string>& candidates) {
  std::optional<std::string> best;
  size_t best_distance = 3;  // at most 2 edits
  for (const std::string& c : candidates) {
    const size_t d = EditDistance(word, c);
    if (d < best_distance && 2 * d < word.size()) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::optional<std::string> SuggestionFor(const CLI::App& app, int argc, const char* const* argv) {
  std::vector<std::string> commands;
  std::vector<std::string> options;
  Collect(app, commands, options);
  for (int i = 1; i < argc; ++i) {
    const std::string_view word = argv[i];
    const std::string_view name = word.substr(0, word.find('='));
    const bool is_option = word.size() > 2 && word.substr(0, 2) == "--";
    const std::vector<std::string>& pool = is_option ? options : commands;
    if (std::find(pool.begin(), pool.end(), name) != pool.end()) {
      continue;
    }
    if (std::optional<std::string> near = Nearest(name, pool)) {
      return std::string(is_option ? "no option '" : "no command '") + std::string(name) +
             "'; did you mean '" + *near + "'?";
    }
  }
  return std::nullopt;
}

}  // namespace isometry::isoctl
