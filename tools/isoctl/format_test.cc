#include "tools/isoctl/format.h"

#include <catch2/catch.hpp>
#include <string>

namespace {

using namespace isometry::isoctl;

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
