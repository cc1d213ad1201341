"""Runs one test of tests/python by its unittest name (module.Class.test_name), for ctest: exit 0
when it passed, 77 when it skipped (ctest's SKIP_RETURN_CODE: an optional extra is missing), 1
when it failed or the name finds no test."""
import sys
import unittest

result = unittest.TextTestRunner(verbosity=2).run(unittest.defaultTestLoader.loadTestsFromName(sys.argv[1]))
if result.testsRun != 1 or not result.wasSuccessful():
    sys.exit(1)
sys.exit(77 if result.skipped else 0)
