"""What a Python test of a real isometryd reads from its environment (the
ctest entry sets it): the daemon and isoctl to run, and where the client
package was built.

    from client_env import ISOMETRYD, ISOCTL, client_modules
    grpc, isometry, pb, pb_grpc = client_modules("test_explain")
"""

import importlib
import os
import sys

ISOMETRYD = os.environ.get("ISOMETRYD", "")
ISOCTL = os.environ.get("ISOCTL", "")


def client_modules(test):
    """(grpc, isometry, isometry_pb2, isometry_pb2_grpc), imported from
    $ISOMETRY_PYTHONPATH; four Nones where ISOMETRYD is not set (the test's
    cases skip then), with a line on stderr saying so."""
    path = os.environ.get("ISOMETRY_PYTHONPATH", "")
    if path and path not in sys.path:
        sys.path.insert(0, path)
    if not ISOMETRYD:
        print(f"{test}: skipped: ISOMETRYD is not set", file=sys.stderr)
        return None, None, None, None
    return (importlib.import_module("grpc"), importlib.import_module("isometry"),
            importlib.import_module("isometry.isometry_pb2"),
            importlib.import_module("isometry.isometry_pb2_grpc"))
