// How isoctl prints what the daemon answered: the -o/--output format, and
// with --watch the frame being printed. Every listing prints through
// PrintText (table, wide) or PrintDocument (json, yaml), so that a watched
// listing gets its frame header or time stamp in one place.
#pragma once

#include <string>

#include "core/status.h"
#include "tools/isoctl/json.h"

namespace isometry::isoctl {

enum class Format {
  kTable,  // today's aligned table
  kWide,   // the table with the columns it leaves out (the same as kTable
           // where the table shows every field)
  kJson,   // the response as one JSON document (json.h)
  kYaml,   // the same document as YAML (yaml_output.h)
};

// "table", "wide", "json", "yaml"; a usage error naming the choices else.
Result<Format> ParseFormat(const std::string& text);
const char* FormatName(Format format);

struct Output {
  Format format = Format::kTable;
  // format == kJson, kept for the commands that only know table or JSON;
  // main sets it from -o or --json before any command runs.
  bool json = false;
  // --watch: print every watch_s seconds until SIGINT/SIGTERM; 0: once.
  double watch_s = 0;
  // Set by RunWatch (watch.h) for each frame. `time` (UTC, RFC 3339) is
  // stamped into each JSON or YAML document; `header` precedes a table.
  std::string time;
  std::string header;
};

// The document in out.format (json or yaml). In a --watch frame the
// document gets a leading "time" field, and JSON is one line a document
// (JSON Lines) and YAML one "---" document a frame.
Status PrintDocument(const Output& out, const Json& document);
// A table (or other human text), after the frame's header.
Status PrintText(const Output& out, const std::string& text);

}  // namespace isometry::isoctl
