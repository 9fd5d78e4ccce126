"""Runs the pytest suite of tests/python and prints one line that tests/run_all.sh adds up:
    [pytest] test cases: N | P passed | F failed | S skipped
A test counts once: failed if any of its phases (setup, call, teardown) failed,
skipped if it was skipped, passed otherwise. Exit status: pytest's.
Usage (tests/python/python_tests in a build dir sets the environment):
    python3 tests/python/run_pytest.py [pytest arguments]
"""

import os
import sys

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

import pytest  # noqa: E402


class Tally:
    def __init__(self):
        self.outcome = {}

    def pytest_runtest_logreport(self, report):
        previous = self.outcome.get(report.nodeid)
        if report.failed:
            self.outcome[report.nodeid] = "failed"
        elif report.skipped and previous != "failed":
            self.outcome[report.nodeid] = "skipped"
        elif report.when == "call" and previous is None:
            self.outcome[report.nodeid] = "passed"

    def line(self):
        counts = {k: list(self.outcome.values()).count(k) for k in ("passed", "failed", "skipped")}
        return (f"[pytest] test cases: {len(self.outcome)} | {counts['passed']} passed | "
                f"{counts['failed']} failed | {counts['skipped']} skipped")


def main():
    # The suite's folder: this one, or AGENTMEM_PYTEST_DIR (tests/install).
    here = os.environ.get("AGENTMEM_PYTEST_DIR") or os.path.dirname(os.path.abspath(__file__))
    tally = Tally()
    # tests/run_all.sh passes doctest's --no-intro=false to every suite: not pytest's.
    args = [a for a in sys.argv[1:] if not a.startswith("--no-intro")]
    rc = pytest.main(["-p", "no:cacheprovider", "-q", "-rs", here] + args, plugins=[tally])
    print(tally.line())
    if rc == pytest.ExitCode.OK or rc == pytest.ExitCode.NO_TESTS_COLLECTED:
        return 0
    return int(rc)


if __name__ == "__main__":
    sys.exit(main())
