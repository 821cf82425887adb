"""``presa-trio validate``: check a capture of MCP traffic, printing each finding as its line
is read, as text or JSON lines, and optionally a JUnit XML report for CI.

It reads and prints; the checking is ``presa_trio.validation``'s.
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from typing import Any, TextIO

from .validation import VERSIONS, CaptureChecker, Finding

HELP = """\
Check a capture of MCP traffic, one JSON value per line. A line is a bare JSON-RPC message (its
side inferred: requests come from the client, responses from the server, except the older
era's sampling, elicitation and roots requests, which come from the server) or a record:
  {"direction": "client"|"server", "message": {...}, "t": SECONDS, "conn": N,
   "exchange": N, "http": {"method": "POST", "status": 200, "headers": {...}}}
Each message is checked against the schema of its protocol version (read from the initialize
exchange, a request's _meta or the MCP-Protocol-Version header; --version forces one), a
result against the typed result of the request it answers, Tasks-extension messages against
the extension's schema; tool calls against the tools/list schemas, progress tokens, ids in
flight, responses to no request, and HTTP statuses and headers where the record has them.

Output: each finding on stdout as soon as its line is read,
  FILE:LINE: DEFINITION at JSON-POINTER: REASON [RULE]
or with --json one JSON object per finding ({"file", "line", "rule", "direction",
"definition", "pointer", "message"}) and a last line {"summary": {"messages", "findings",
"bad_lines"}}. Without --json the summary ("N message(s), M bad") goes to stderr. --junit
FILE also writes JUnit XML: one testcase per message, a failure per finding.
Exit status: 0 no finding, 1 some finding, 2 the capture could not be read (or bad options).
"""


def add_parser(commands: Any) -> None:
    """Add ``validate`` to the ``presa-trio`` command's subparsers."""
    validate = commands.add_parser(
        "validate",
        help="check a capture of MCP traffic",
        description=HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    validate.set_defaults(run=run)
    validate.add_argument("file", help="JSON-lines capture ('-' reads stdin as lines arrive)")
    validate.add_argument(
        "--json", action="store_true", help="print findings as JSON lines, then a summary"
    )
    validate.add_argument("--junit", metavar="FILE", help="also write a JUnit XML report")
    validate.add_argument(
        "--version",
        dest="schema_version",
        choices=VERSIONS,
        default=None,
        help="check every line with this revision's schema (default: as negotiated)",
    )


def _lines(handle: TextIO) -> Iterator[str]:
    """Each line as soon as it is complete (``readline`` does not wait for a full buffer)."""
    while True:
        raw = handle.readline()
        if not raw:
            return
        yield raw


def run(args: argparse.Namespace) -> int:
    try:
        if args.file == "-":
            return _validate(args, sys.stdin)
        with open(args.file, encoding="utf-8") as handle:
            return _validate(args, handle)
    except (OSError, UnicodeDecodeError) as exc:
        print(f"presa-trio: cannot read {args.file}: {exc}", file=sys.stderr)
        return 2


def _validate(args: argparse.Namespace, handle: TextIO) -> int:
    checker = CaptureChecker(version=args.schema_version)
    cases: list[tuple[int, list[Finding]]] = []
    bad_lines: set[int] = set()
    count = 0
    for number, raw in enumerate(_lines(handle), start=1):
        if not raw.strip():
            continue
        findings = list(checker.check_line(number, raw))
        count += len(findings)
        cases.append((number, findings))
        for finding in findings:
            bad_lines.add(finding.line)
            if args.json:
                print(json.dumps({"file": args.file, **finding.as_dict()}), flush=True)
            else:
                print(f"{args.file}:{finding} [{finding.rule}]", flush=True)
    summary = {"messages": len(cases), "findings": count, "bad_lines": len(bad_lines)}
    if args.json:
        print(json.dumps({"summary": summary}), flush=True)
    else:
        print(f"{len(cases)} message(s), {len(bad_lines)} bad", file=sys.stderr)
    if args.junit:
        try:
            _write_junit(args.junit, args.file, cases)
        except OSError as exc:
            print(f"presa-trio: cannot write {args.junit}: {exc}", file=sys.stderr)
            return 2
    return 1 if bad_lines else 0


def _write_junit(path: str, name: str, cases: list[tuple[int, list[Finding]]]) -> None:
    failures = sum(1 for _, findings in cases if findings)
    suite = ET.Element(
        "testsuite",
        name=f"presa-trio validate {name}",
        tests=str(len(cases)),
        failures=str(failures),
        errors="0",
    )
    for number, findings in cases:
        case = ET.SubElement(suite, "testcase", classname=name, name=f"line {number}")
        for finding in findings:
            failure = ET.SubElement(
                case,
                "failure",
                type=finding.rule,
                message=f"{finding.definition} at {finding.pointer or '/'}: {finding.message}",
            )
            failure.text = json.dumps(finding.as_dict())
    suites = ET.Element("testsuites")
    suites.append(suite)
    ET.ElementTree(suites).write(path, encoding="utf-8", xml_declaration=True)
