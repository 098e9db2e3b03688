#include "tools/isoctl/yaml_output.h"

#include <catch2/catch.hpp>
#include <limits>
#include <string>

namespace {

using isometry::isoctl::Json;
using isometry::isoctl::ToYaml;

// The one-key document {"k": value} as YAML, without "k: " and the newline.
std::string Value(const Json& value) {
  auto text = ToYaml(Json{{"k", value}});
  REQUIRE(text.ok());
  REQUIRE(text->starts_with("k: "));
  return text->substr(3, text->size() - 4);
}

TEST_CASE("A word is plain; what a loader would read as another type is quoted") {
  CHECK(Value("sys0") == "sys0");
  CHECK(Value("peer ghost") == "peer ghost");
  CHECK(Value("sys0->reg0") == "sys0->reg0");
  // Numbers, YAML 1.1 booleans and null, in any case.
  CHECK(Value("1513") == "'1513'");
  CHECK(Value("0.1.0") == "'0.1.0'");
  CHECK(Value("on") == "'on'");
  CHECK(Value("No") == "'No'");
  CHECK(Value("y") == "'y'");
  CHECK(Value("NULL") == "'NULL'");
  CHECK(Value(".inf") == "'.inf'");
  CHECK(Value("") == "''");
}

TEST_CASE("What plain style cannot hold is quoted by libyaml") {
  CHECK(Value("a: b") == "'a: b'");
  CHECK(Value("a #b") == "'a #b'");
  CHECK(Value("trailing ") == "'trailing '");
  CHECK(Value("it's") == "it's");
  CHECK(Value("bell\a") == "\"bell\\a\"");
  // Not UTF-8: replaced, as the JSON output does.
  CHECK(Value(std::string("a\xff")) == "a\xef\xbf\xbd");
  CHECK(Value("caf\u00e9") == "caf\u00e9");
}

TEST_CASE("Numbers keep their type: every float has a dot") {
  CHECK(Value(uint64_t{18446744073709551615ULL}) == "18446744073709551615");
  CHECK(Value(-1) == "-1");
  CHECK(Value(5.0) == "5.0");
  CHECK(Value(0.25) == "0.25");
  CHECK(Value(1e-05) == "1.0e-05");
  CHECK(Value(1e300) == "1.0e+300");
  CHECK(Value(std::numeric_limits<double>::quiet_NaN()) == "null");
  CHECK(Value(true) == "true");
  CHECK(Value(nullptr) == "null");
}

TEST_CASE("Block style; empty lists and objects in flow style; a stream's marker") {
  const Json doc = {{"name", "a"},
                    {"peers", Json::array()},
                    {"id", {{"node", 0}}},
                    {"edges", {"x", "z"}},
                    {"none", Json::object()}};
  auto text = ToYaml(doc);
  REQUIRE(text.ok());
  CHECK(*text == "name: a\npeers: []\nid:\n  node: 0\nedges:\n- x\n- z\nnone: {}\n");
  auto framed = ToYaml(Json{{"time", "2026-12-02T07:41:03.250Z"}}, {.document_marker = true});
  REQUIRE(framed.ok());
  CHECK(*framed == "---\ntime: '2026-12-02T07:41:03.250Z'\n");
}

}  // namespace
