#include "tools/isoctl/output.h"

#include <cstdio>

#include "tools/isoctl/exit_codes.h"
#include "tools/isoctl/yaml_output.h"

namespace isometry::isoctl {

Result<Format> ParseFormat(const std::string& text) {
  for (const Format f : {Format::kTable, Format::kWide, Format::kJson, Format::kYaml}) {
    if (text == FormatName(f)) {
      return f;
    }
  }
  return UsageError(StrCat("-o/--output '", text, "': expected table, wide, json or yaml"));
}

const char* FormatName(Format format) {
  switch (format) {
    case Format::kTable:
      return "table";
    case Format::kWide:
      return "wide";
    case Format::kJson:
      return "json";
    case Format::kYaml:
      return "yaml";
  }
  return "?";
}

Status PrintDocument(const Output& out, const Json& document) {
  const bool watched = !out.time.empty();
  Json stamped;
  if (watched) {
    // "time" first, so a reader of a stream sees it before the rest.
    stamped = Json{{"time", out.time}};
    for (const auto& [key, value] : document.items()) {
      stamped[key] = value;
    }
  }
  const Json& doc = watched ? stamped : document;
  if (out.format == Format::kYaml) {
    ISO_ASSIGN_OR_RETURN(std::string text, ToYaml(doc, {.document_marker = watched}));
    std::fputs(text.c_str(), stdout);
    std::fflush(stdout);
    return OkStatus();
  }
  return PrintJson(doc, watched ? JsonStyle::kLine : JsonStyle::kPretty);
}

Status PrintText(const Output& out, const std::string& text) {
  // One write a frame, so that a redrawn terminal does not flicker.
  std::fputs((out.header + text).c_str(), stdout);
  std::fflush(stdout);
  return OkStatus();
}

}  // namespace isometry::isoctl
