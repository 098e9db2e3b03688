#!/usr/bin/python3
"""Runs one unittest module for ctest, where a skip must not read "Passed".

    run_unittest.py MODULE [--only TEST ...] [--except TEST ...]

MODULE is imported from the working directory. --only keeps the test
methods named (test_x, or Class.test_x); --except drops them, so a case
that may skip on some machines gets a ctest entry of its own while the
module's other cases run in the main entry.

Exit status: 1 when a test failed or none matched; 77 (ctest's
SKIP_RETURN_CODE) when any test skipped and none failed, after printing
why; 0 when every selected test ran and passed.
"""

import argparse
import os
import sys
import unittest

SKIPPED = 77


def flatten(suite):
    for t in suite:
        if isinstance(t, unittest.TestSuite):
            yield from flatten(t)
        else:
            yield t


def names(test):
    """The names a test answers to: test_x and Class.test_x."""
    method = getattr(test, "_testMethodName", None)
    # A module that failed to import is a _FailedTest: always run it, so the
    # import error is what the run reports.
    if method is None or type(test).__name__ == "_FailedTest":
        return None
    return {method, f"{type(test).__name__}.{method}"}


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("module")
    parser.add_argument("--only", nargs="+", default=[], metavar="TEST")
    parser.add_argument("--except", dest="exclude", nargs="+", default=[], metavar="TEST")
    args = parser.parse_args(argv[1:])

    sys.path.insert(0, os.getcwd())
    selected = []
    for t in flatten(unittest.defaultTestLoader.loadTestsFromName(args.module)):
        n = names(t)
        if n is not None and args.only and not n & set(args.only):
            continue
        if n is not None and n & set(args.exclude):
            continue
        selected.append(t)
    if not selected:
        print(f"run_unittest: no test in {args.module} matches {args.only}", file=sys.stderr)
        return 1

    result = unittest.TextTestRunner(verbosity=2).run(unittest.TestSuite(selected))
    if not result.wasSuccessful():
        return 1
    if result.skipped:
        for test, why in result.skipped:
            print(f"run_unittest: skipped {test.id()}: {why}", file=sys.stderr)
        return SKIPPED
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
