"""The file-size rule: long files fail unless they say why."""

import os
import sys
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
import check_file_size as cfs  # noqa: E402


class FileSizeTest(unittest.TestCase):
    def test_a_file_at_the_limit_passes(self):
        self.assertIsNone(cfs.violation("a.cc", ["x"] * cfs.LIMIT))

    def test_a_longer_file_fails_with_its_length(self):
        message = cfs.violation("a.cc", ["x"] * (cfs.LIMIT + 1))
        self.assertIn("a.cc: 621 lines", message)

    def test_a_reason_near_the_top_lets_it_pass(self):
        lines = ["// what it is", "// Long file: one state machine the kernel API dictates"]
        self.assertIsNone(cfs.violation("a.cc", lines + ["x"] * cfs.LIMIT))

    def test_an_empty_or_late_reason_does_not(self):
        self.assertIsNotNone(cfs.violation("a.cc", ["// Long file:"] + ["x"] * cfs.LIMIT))
        late = ["x"] * cfs.HEAD_LINES + ["// Long file: said too far down to be seen"]
        self.assertIsNotNone(cfs.violation("a.cc", late + ["x"] * cfs.LIMIT))


if __name__ == "__main__":
    unittest.main()
