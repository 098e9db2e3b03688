// -o yaml: a JSON document (json.h) as YAML, written by libyaml's emitter.
// The YAML reads back, with any YAML 1.1 or 1.2 loader (PyYAML's
// safe_load among them), as the same values of the same types as the JSON:
// a string that a loader would take for a number, a boolean or null
// ("1513", "on", "null") is quoted, and every float carries a "." so that
// YAML 1.1 reads it as a float. Block style; an empty list is "[]".
#pragma once

#include <string>

#include "core/status.h"
#include "tools/isoctl/json.h"

namespace isometry::isoctl {

struct YamlOptions {
  // Start the document with "---", as each document of a stream must.
  bool document_marker = false;
};

// The YAML text, ending in a newline; an error only when libyaml fails.
Result<std::string> ToYaml(const Json& document, YamlOptions options = {});

}  // namespace isometry::isoctl
