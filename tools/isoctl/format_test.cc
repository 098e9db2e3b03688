#include "tools/isoctl/format.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using namespace isometry::isoctl;

TEST_CASE("cells another user chose reach the terminal as printable ASCII") {
  CHECK(PrintableCell("victim-7 ok") == "victim-7 ok");
  // Clear the screen, retitle the terminal, forge a row.
  CHECK(PrintableCell("\x1b[2J\x1b]0;pwned\x07x\r\n7  root") ==
        "\\x1b[2J\\x1b]0;pwned\\x07x\\x0d\\x0a7  root");
  // An 8-bit CSI, DEL, and UTF-8 (its bytes, not its glyph).
  CHECK(PrintableCell("\x9b"
                      "2J\x7f") == "\\x9b2J\\x7f");
  CHECK(PrintableCell("caf\xc3\xa9") == "caf\\xc3\\xa9");
  CHECK(PrintableCell(std::string("a\0b", 3)) == "a\\x00b");
}

TEST_CASE("a table escapes every cell and aligns on what it prints") {
  Table t({{"ID", Table::Align::kRight}, {"CLIENT"}, {"STATE"}});
  t.AddRow({"1", "plain", "done"});
  t.AddRow({"22", "evil\r\n3  root  forged", "done"});
  const std::string out = t.Render();
  CHECK(out ==
        "ID  CLIENT                       STATE\n"
        " 1  plain                        done\n"
        "22  evil\\x0d\\x0a3  root  forged  done\n");
  CHECK(RenderFields({{"message", "bad\x1b[31m"}}) == "message  bad\\x1b[31m\n");
}

}  // namespace
