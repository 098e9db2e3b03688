#include "proto/ring_validate.h"

#include <catch2/catch.hpp>
#include <cstring>

namespace ISOMETRY_TEST_FILE {

using namespace isometry;
using namespace isometry::ring;

namespace {
SubmissionEntry Entry(uint16_t op) {
  SubmissionEntry e;
  std::memset(&e, 0, sizeof e);
  e.op = op;
  return e;
}
}  // namespace

TEST_CASE("well-formed submissions pass with their fields") {
  SubmissionEntry copy = Entry(static_cast<uint16_t>(Op::kCopy));
  copy.src_instance = 7;
  copy.dst_instance = UINT64_MAX;
  copy.priority = INT32_MIN;
  auto v = ValidateSubmission(copy);
  REQUIRE(v.ok());
  CHECK(v->op == Op::kCopy);
  CHECK(v->src_instance == 7);
  CHECK(v->dst_instance == UINT64_MAX);
  CHECK(v->priority == INT32_MIN);

  SubmissionEntry cancel = Entry(static_cast<uint16_t>(Op::kCancel));
  cancel.transfer = 42;
  REQUIRE(ValidateSubmission(cancel).ok());
  CHECK(ValidateSubmission(cancel)->transfer == 42);
  CHECK(ValidateSubmission(Entry(0))->op == Op::kNop);
}

TEST_CASE("flags, reserved bytes and unknown ops are INVALID_ARGUMENT that fits a completion") {
  SubmissionEntry flags = Entry(0);
  flags.flags = 1;
  SubmissionEntry reserved = Entry(1);
  reserved.reserved[23] = 0x80;
  for (const SubmissionEntry& e : {flags, reserved, Entry(3), Entry(0xffff)}) {
    const auto v = ValidateSubmission(e);
    REQUIRE(!v.ok());
    CHECK(v.status().code() == absl::StatusCode::kInvalidArgument);
    CHECK(v.status().message().size() <= sizeof(CompletionEntry::message));
  }
  CHECK_THAT(std::string(ValidateSubmission(Entry(0xffff)).status().message()),
             Catch::Contains("unknown ring op 65535"));
}

TEST_CASE("a copy may promise to run its own hops; no other flag or op may carry it") {
  SubmissionEntry copy = Entry(static_cast<uint16_t>(Op::kCopy));
  CHECK_FALSE(ValidateSubmission(copy)->client_runs_hops);
  copy.flags = kFlagClientRunsHops;
  REQUIRE(ValidateSubmission(copy).ok());
  CHECK(ValidateSubmission(copy)->client_runs_hops);
  copy.flags = kFlagClientRunsHops | 8;
  CHECK(ValidateSubmission(copy).status().code() == absl::StatusCode::kInvalidArgument);
  SubmissionEntry cancel = Entry(static_cast<uint16_t>(Op::kCancel));
  cancel.flags = kFlagClientRunsHops;
  CHECK(ValidateSubmission(cancel).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a copy may skip the sync of its DSK destination; no other op may ask") {
  SubmissionEntry copy = Entry(static_cast<uint16_t>(Op::kCopy));
  CHECK(ValidateSubmission(copy)->durable);
  copy.flags = kFlagNoSync;
  REQUIRE(ValidateSubmission(copy).ok());
  CHECK_FALSE(ValidateSubmission(copy)->durable);
  CHECK_FALSE(ValidateSubmission(copy)->client_runs_hops);
  copy.flags = kFlagNoSync | kFlagClientRunsHops;
  CHECK_FALSE(ValidateSubmission(copy)->durable);
  CHECK(ValidateSubmission(copy)->client_runs_hops);
  SubmissionEntry nop = Entry(static_cast<uint16_t>(Op::kNop));
  nop.flags = kFlagNoSync;
  CHECK(ValidateSubmission(nop).status().code() == absl::StatusCode::kInvalidArgument);
}

TEST_CASE("a copy may ask for its transfer id at acceptance; no other op may ask") {
  SubmissionEntry copy = Entry(static_cast<uint16_t>(Op::kCopy));
  CHECK_FALSE(ValidateSubmission(copy)->report_accepted);
  copy.flags = kFlagReportAccepted | kFlagNoSync;
  REQUIRE(ValidateSubmission(copy).ok());
  CHECK(ValidateSubmission(copy)->report_accepted);
  CHECK_FALSE(ValidateSubmission(copy)->durable);
  for (const Op op : {Op::kNop, Op::kCancel}) {
    SubmissionEntry other = Entry(static_cast<uint16_t>(op));
    other.flags = kFlagReportAccepted;
    CHECK(ValidateSubmission(other).status().code() == absl::StatusCode::kInvalidArgument);
  }
}

}  // namespace ISOMETRY_TEST_FILE
