#!/usr/bin/env python3
"""Validates a SARIF file against the bundled SARIF 2.1.0 schema (Draft 4).

usage: validate_sarif.py SCHEMA SARIF
Exit 0 when valid, 1 with the errors listed when not, 3 when python3-jsonschema is missing.
"""
import json
import sys

try:
    import jsonschema
except ImportError:
    print("python3-jsonschema is not installed (apt-get install python3-jsonschema)", file=sys.stderr)
    sys.exit(3)


def main():
    schema = json.load(open(sys.argv[1], encoding="utf-8"))
    doc = json.load(open(sys.argv[2], encoding="utf-8"))
    validator = jsonschema.Draft4Validator(schema, format_checker=jsonschema.FormatChecker())
    errors = sorted(validator.iter_errors(doc), key=lambda e: list(e.absolute_path))
    for e in errors:
        print("/".join(str(p) for p in e.absolute_path) + ": " + e.message, file=sys.stderr)
    sys.exit(1 if errors else 0)


main()
