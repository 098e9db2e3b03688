// Client-supplied strings in log lines.
//
// A client name, a file name or a layout string reaches the log as the
// client wrote it: a newline there forges a log line, a control character
// rewrites the terminal, a 4 MiB name floods the journal. Every string a
// client controls goes through ForLog before it is formatted.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace isometry {

// Appends `s` to `out` with bytes outside printable ASCII, and backslash
// when `backslash`, written as \xNN.
inline void AppendEscaped(std::string& out, std::string_view s, bool backslash) {
  static constexpr char kHex[] = "0123456789abcdef";
  out.reserve(out.size() + s.size() + 16);
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    if (c >= 0x20 && c < 0x7f && (c != '\\' || !backslash)) {
      out.push_back(ch);
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
}

// `s` with bytes outside printable ASCII (and backslash) written as \xNN,
// cut to `max_bytes` of input with "...(N bytes)" appended when longer.
inline std::string ForLog(std::string_view s, size_t max_bytes = 128) {
  std::string out;
  AppendEscaped(out, s.substr(0, max_bytes), /*backslash=*/true);
  if (s.size() > max_bytes) {
    out += "...(" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

// `s` as a terminal shows it harmlessly: bytes outside printable ASCII
// (control bytes, escape sequences, C1 controls, UTF-8) as \xNN, whole.
// Backslash stays, so text ForLog already escaped passes unchanged.
inline std::string ForTerminal(std::string_view s) {
  std::string out;
  AppendEscaped(out, s, /*backslash=*/false);
  return out;
}

}  // namespace isometry
