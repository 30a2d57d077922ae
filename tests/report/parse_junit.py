#!/usr/bin/env python3
"""Parses a JUnit XML file with the standard library and prints what CI tools read from it:
one line per test case, "CLASSNAME NAME [TIME s]: passed", "...: failed (MESSAGE)" or
"...: skipped (MESSAGE)", then the totals. Also checks what a schema cannot: the counts on
<testsuites> and <testsuite> match the cases (tests, failures, errors, skipped).

usage: parse_junit.py FILE   (exit 1 when the file is not well-formed XML or a count is wrong)
"""
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except ET.ParseError as e:
    print("not well-formed: %s" % e, file=sys.stderr)
    sys.exit(1)
bad = []


def check(elem, what, expected):
    if elem.get(what) is not None and int(elem.get(what)) != expected:
        bad.append("<%s name=%r> says %s=%s, has %d" % (elem.tag, elem.get("name"), what, elem.get(what), expected))


cases = root.findall(".//testcase")
failed = skipped = 0
for c in cases:
    head = "%s %s [%s s]" % (c.get("classname"), c.get("name"), c.get("time"))
    f, s = c.find("failure"), c.find("skipped")
    if f is not None:
        failed += 1
        print("%s: failed (%s)" % (head, f.get("message")))
    elif s is not None:
        skipped += 1
        print("%s: skipped (%s)" % (head, s.get("message")))
    else:
        print("%s: passed" % head)
for suite in root.iter("testsuite"):
    mine = suite.findall("testcase")
    check(suite, "tests", len(mine))
    check(suite, "failures", sum(1 for c in mine if c.find("failure") is not None))
    check(suite, "errors", sum(1 for c in mine if c.find("error") is not None))
    check(suite, "skipped", sum(1 for c in mine if c.find("skipped") is not None))
if root.tag == "testsuites":
    check(root, "tests", len(cases))
    check(root, "failures", failed)
    check(root, "errors", sum(1 for c in cases if c.find("error") is not None))
print("testsuites tests=%s failures=%s time=%s; %d cases, %d failed, %d skipped"
      % (root.get("tests"), root.get("failures"), root.get("time"), len(cases), failed, skipped))
for b in bad:
    print(b, file=sys.stderr)
sys.exit(1 if bad else 0)
