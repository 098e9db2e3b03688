// Small string helpers over std::string_view (Debian's abseil has its own
// string_view type, so its helpers do not take ours).
#pragma once

#include <charconv>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace isometry {

inline std::string AsciiLower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
  }
  return out;
}

inline std::string AsciiUpper(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    c = (c >= 'a' && c <= 'z') ? static_cast<char>(c - 'a' + 'A') : c;
  }
  return out;
}

inline std::string_view TrimAscii(std::string_view s) {
  const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
  while (!s.empty() && space(s.front())) {
    s.remove_prefix(1);
  }
  while (!s.empty() && space(s.back())) {
    s.remove_suffix(1);
  }
  return s;
}

inline std::vector<std::string_view> SplitOn(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t pos = s.find(sep, start);
    out.push_back(s.substr(start, pos == std::string_view::npos ? pos : pos - start));
    if (pos == std::string_view::npos) {
      return out;
    }
    start = pos + 1;
  }
}

// Whole-string parses: trailing characters make them fail.
// `v` as "0x" and lower-case hex digits: an address in a message.
inline std::string HexAddress(uint64_t v) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string s;
  do {
    s.insert(s.begin(), kDigits[v & 15]);
    v >>= 4;
  } while (v);
  return "0x" + s;
}

template <typename T>
std::optional<T> ParseNumber(std::string_view s) {
  T v{};
  const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) {
    return std::nullopt;
  }
  return v;
}

// The message of errno value `err`. std::strerror may share one buffer
// between threads; GNU strerror_r (what glibc gives C++) does not.
inline std::string ErrnoString(int err) {
  char buf[256];
  return strerror_r(err, buf, sizeof(buf));
}

}  // namespace isometry
