#!/usr/bin/env python3
"""Parses a JUnit XML file with the standard library and prints what CI tools read from it:
one line per test case, "NAME: passed" or "NAME: failed (MESSAGE)", then the totals.

usage: parse_junit.py FILE   (exit 1 when the file is not well-formed XML)
"""
import sys
import xml.etree.ElementTree as ET

try:
    root = ET.parse(sys.argv[1]).getroot()
except ET.ParseError as e:
    print("not well-formed: %s" % e, file=sys.stderr)
    sys.exit(1)
cases = root.findall(".//testcase")
failed = 0
for c in cases:
    f = c.find("failure")
    if f is None:
        print("%s: passed" % c.get("name"))
    else:
        failed += 1
        print("%s: failed (%s)" % (c.get("name"), f.get("message")))
print("testsuites tests=%s failures=%s; %d cases, %d failed" % (root.get("tests"), root.get("failures"), len(cases), failed))
