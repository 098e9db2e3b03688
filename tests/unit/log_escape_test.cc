#include "core/log_escape.h"

#include <catch2/catch.hpp>
#include <string>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;

TEST_CASE("ForLog keeps printable text as it is") {
  CHECK(ForLog("sys0") == "sys0");
  CHECK(ForLog("data/run 1.bin") == "data/run 1.bin");
  CHECK(ForLog("") == "");
}

TEST_CASE("ForLog escapes what could forge or rewrite a log line") {
  // A newline would start a fake line of its own; it stays on this one.
  const std::string forged = ForLog("x\n[info] session 1 closed");
  CHECK(forged == "x\\x0a[info] session 1 closed");
  CHECK(forged.find('\n') == std::string::npos);
  CHECK(ForLog("\r\x1b[2J") == "\\x0d\\x1b[2J");
  // The escape character itself is escaped, so "\x0a" typed by a client
  // cannot pass for an escaped newline.
  CHECK(ForLog("a\\x0a") == "a\\x5cx0a");
  CHECK(ForLog(std::string("a\0b", 3)) == "a\\x00b");
  CHECK(ForLog("\xff\x7f") == "\\xff\\x7f");
}

TEST_CASE("ForLog bounds the length and says how long the original was") {
  const std::string huge(4 << 20, 'n');
  const std::string shown = ForLog(huge);
  CHECK(shown == std::string(128, 'n') + "...(4194304 bytes)");
  CHECK(ForLog("abcdef", 3) == "abc...(6 bytes)");
  CHECK(ForLog("abc", 3) == "abc");
  // Escaping happens within the bound: at most 4 output bytes per input byte.
  CHECK(ForLog(std::string(1000, '\n'), 10).size() == 40 + std::string("...(1000 bytes)").size());
}

TEST_CASE("ForTerminal: cells another user chose reach the terminal as printable ASCII") {
  CHECK(ForTerminal("victim-7 ok") == "victim-7 ok");
  // Clear the screen, retitle the terminal, forge a row.
  CHECK(ForTerminal("\x1b[2J\x1b]0;pwned\x07x\r\n7  root") ==
        "\\x1b[2J\\x1b]0;pwned\\x07x\\x0d\\x0a7  root");
  // An 8-bit CSI, DEL, and UTF-8 (its bytes, not its glyph).
  CHECK(ForTerminal("\x9b"
                    "2J\x7f") == "\\x9b2J\\x7f");
  CHECK(ForTerminal("caf\xc3\xa9") == "caf\\xc3\\xa9");
  CHECK(ForTerminal(std::string("a\0b", 3)) == "a\\x00b");
  // What ForLog escaped already passes unchanged, and nothing is cut.
  CHECK(ForTerminal(ForLog("\x1b]0;x")) == "\\x1b]0;x");
  CHECK(ForTerminal(std::string(300, 'n')) == std::string(300, 'n'));
}

}  // namespace ISOMETRY_TEST_FILE
