#!/usr/bin/python3
"""Runs rdma-core's pyverbs test suite on one device and judges the result.

The suite is Debian's python3-pyverbs copy (/usr/share/doc/rdma-core/tests,
unpacked by run_pyverbs.sh into a scratch directory). It is loaded the way
its own run_tests.py loads it (the `tests` package and its args_parser), but
run with a result class that records every test's outcome, so the verdict
does not depend on parsing unittest's text.

Prints unittest's usual verbose output, then one line per test
("RESULT <outcome> <test id> [reason]"), then a summary line:
  pyverbs on <dev>: P passed, F failed, E errors, S skipped (T tests)
Exit status 0 only if F == 0, E == 0, P >= --min-passed and (with
--skips-doc) every skipped test matches a pattern listed in that file;
1 otherwise.
"""

import argparse
import fnmatch
import importlib.util
import os
import re
import sys
import unittest


class RecordingResult(unittest.TextTestResult):
    """TextTestResult that keeps (outcome, test id, reason) for every test."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.records = []

    def _add(self, outcome, test, reason=''):
        self.records.append((outcome, test.id(), ' '.join(str(reason).split())))

    def addSuccess(self, test):
        super().addSuccess(test)
        self._add('passed', test)

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._add('failed', test, err[1])

    def addError(self, test, err):
        super().addError(test, err)
        self._add('error', test, err[1])

    def addSkip(self, test, reason):
        super().addSkip(test, reason)
        self._add('skipped', test, reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._add('passed', test, 'expected failure')

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._add('failed', test, 'unexpected success')


def load_suite(suite_dir, dev, gid, names):
    """The suite's `tests` package, configured for `dev` (and GID index
    `gid`, or the suite's own choice if None) as run_tests.py does."""
    sys.path.insert(0, suite_dir)
    from args_parser import parser  # the suite's own option parser
    sys.argv = [sys.argv[0], '--dev', dev] + ([] if gid is None else ['--gid', str(gid)])
    parser.parse_args()
    spec = importlib.util.spec_from_file_location(
        'tests', os.path.join(suite_dir, '__init__.py'),
        submodule_search_locations=[suite_dir])
    tests = importlib.util.module_from_spec(spec)
    sys.modules['tests'] = tests
    spec.loader.exec_module(tests)
    loader = unittest.TestLoader()
    if names:
        return loader.loadTestsFromNames(names, tests)
    return loader.loadTestsFromModule(tests)


def documented_skips(path):
    """Test-id patterns (fnmatch) in the first column of the skip tables of
    `path`: every `tests.<...>` in backquotes in the first cell of a row."""
    patterns = []
    with open(path, encoding='utf-8') as f:
        for line in f:
            cells = line.split('|')
            if len(cells) > 2 and line.startswith('|'):
                patterns += re.findall(r'`(tests\.[^`]+)`', cells[1])
    return patterns


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--suite', required=True, help='unpacked suite directory')
    ap.add_argument('--dev', required=True, help='RDMA device to run on')
    ap.add_argument('--gid', type=int, help="GID index (default: the suite's choice)")
    ap.add_argument('--min-passed', type=int, default=0)
    ap.add_argument('--skips-doc', help='file listing every allowed skip')
    ap.add_argument('--results', help='also write the RESULT lines here')
    ap.add_argument('names', nargs='*', help='run only these tests')
    a = ap.parse_args()

    suite = load_suite(os.path.abspath(a.suite), a.dev, a.gid, a.names)
    runner = unittest.TextTestRunner(stream=sys.stdout, verbosity=2,
                                     resultclass=RecordingResult)
    result = runner.run(suite)

    counts = {'passed': 0, 'failed': 0, 'error': 0, 'skipped': 0}
    lines = []
    for outcome, test_id, reason in result.records:
        counts[outcome] += 1
        lines.append(f'RESULT {outcome} {test_id}' + (f' [{reason}]' if reason else ''))
    print('\n'.join(lines))
    if a.results:
        with open(a.results, 'w', encoding='utf-8') as f:
            f.write('\n'.join(lines) + '\n')

    ok = True
    undocumented = []
    if a.skips_doc:
        patterns = documented_skips(a.skips_doc)
        for outcome, test_id, reason in result.records:
            if outcome == 'skipped' and \
                    not any(fnmatch.fnmatchcase(test_id, p) for p in patterns):
                undocumented.append(f'{test_id} [{reason}]')
    for u in undocumented:
        print(f'UNDOCUMENTED SKIP {u} (not listed in {a.skips_doc})')
    ok = not undocumented
    total = len(result.records)
    print(f"pyverbs on {a.dev}: {counts['passed']} passed, {counts['failed']} failed, "
          f"{counts['error']} errors, {counts['skipped']} skipped ({total} tests)")
    if counts['failed'] or counts['error']:
        ok = False
    if counts['passed'] < a.min_passed:
        print(f"FAIL: {counts['passed']} passed, at least {a.min_passed} required")
        ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
