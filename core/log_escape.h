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

// `s` with bytes outside printable ASCII (and backslash) written as \xNN,
// cut to `max_bytes` of input with "...(N bytes)" appended when longer.
inline std::string ForLog(std::string_view s, size_t max_bytes = 128) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  const size_t n = s.size() < max_bytes ? s.size() : max_bytes;
  out.reserve(n + 16);
  for (size_t i = 0; i < n; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      out += "\\x";
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xf]);
    }
  }
  if (s.size() > n) {
    out += "...(" + std::to_string(s.size()) + " bytes)";
  }
  return out;
}

}  // namespace isometry
