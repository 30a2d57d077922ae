#!/usr/bin/env python3
"""Compares re-recorded GPU fixtures with the committed ones, finding for finding.

    python3 scripts/gpu/compare_fixtures.py rerecord.tar.gz [build/bin/streamrace]
        [--fixtures tests/data/gpu] [--ignore FIELD,...] [--strict] [-v]

The tarball is what scripts/gpu/rerecord_batch.sh packs: traces/<case>/*.srace and logs/
(logs/summary.txt names the cases it skipped, and why). For every case it runs
`streamrace analyze --format json` on the committed tests/data/gpu/<case>/ and on the
re-recorded traces, with the options the case runner uses for that case (each
expected.<FLAG>.json of the case is one more analysis with --FLAG; tests/README.md), and
compares:

  * the analyzer's exit status;
  * the findings as a multiset of: kind, confidence, mode, occurrences, ranks, overlap bytes,
    whether both accesses are on one stream, the (rank, count) of each occurrence group, and
    per access (earlier, later, the released one of a use-after-reuse): op, op_kind,
    direction, exact, by_signature, by_library_call, bytes, the allocation's kind and bytes,
    the stream's label without its address, the user's site (Python frames outside torch/:
    file, line, function; else the first native frame outside the CUDA libraries: file and
    function, as the analyzer's site_of) and, for a graph node, the launch's API, stream
    label and site;
  * the traces as a multiset of (rank, capture_status, mode, complete, truncated, capture);
  * summary.unanalysed_graph_launches, and the notices (level, text with numbers masked).

Never compared: addresses, handles, seq/call numbers, pids, host thread numbers, trace paths,
pcs, native stacks beyond the site. Compared only as notes (they decide nothing unless
--strict): fingerprints (they hash native frames, which the tracer's launch callbacks change),
the missing-edge and fix texts (addresses and numbers masked), record and access counts, and
the notices' numbers.

Launch names: the tracer now records kernel launches from the driver's callbacks
(cuLaunchKernel...) where it recorded the runtime's (cudaLaunchKernel...): every string
compared has cudaLaunchKernel*, cuLaunchKernel* (and the Cooperative forms) replaced by
"launch"; the output says how many strings that changed.

--ignore drops fields from the comparison: exit, alloc (the allocation's kind and bytes),
bytes (access and overlap bytes), site, notices, traces, graph (unanalysed graph launches).

One line per case: SAME / DIFFERENT (with the difference) / SKIPPED (with why); a final count.
Exit 0 only if every compared case is SAME (and at least one was compared), 1 otherwise,
2 on bad usage. Standard library only.
"""
import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LAUNCH_RE = re.compile(r"(?<![A-Za-z0-9])_*cu(?:da)?Launch(?:Cooperative)?Kernel\w*")
HEX_RE = re.compile(r"0x[0-9a-fA-F]+")
NUM_RE = re.compile(r"\d+")
SEQ_RE = re.compile(r"#\d+")
THREAD_RE = re.compile(r"host thread \d+")
CUDA_LIBS = ("libcuda.so", "libcudart", "libcupti", "libsanitizer")
IGNORABLE = {"exit", "alloc", "bytes", "site", "notices", "traces", "graph"}


class Normaliser:
    """The launch-name normalisation, counting what it changed per side."""

    def __init__(self):
        self.changed = collections.Counter()
        self.side = ""

    def launch(self, s):
        if not isinstance(s, str):
            return s
        t = LAUNCH_RE.sub("launch", s)
        if t != s:
            self.changed[self.side] += 1
        return t

    def label(self, s):
        return THREAD_RE.sub("host thread ?", HEX_RE.sub("0x?", self.launch(s or "")))

    def text(self, s):
        return SEQ_RE.sub("#?", self.label(s))


def basename(p):
    return (p or "").rsplit("/", 1)[-1]


def site(stack, norm):
    """The user's site of a stack: its Python frames outside torch/ (else its first Python
    frame), or the first native frame outside the CUDA libraries (else the innermost)."""
    stack = stack or []
    py = [f for f in stack if f.get("python")]
    if py:
        user = [f for f in py if "/torch/" not in (f.get("file") or "")] or py[:1]
        return ["py", [[basename(f.get("file")), f.get("line", 0), norm.launch(f.get("function", ""))] for f in user[:4]]]
    for f in stack:
        if not basename(f.get("file")).startswith(CUDA_LIBS):
            return ["native", basename(f.get("file")), norm.launch(f.get("function", ""))]
    if stack:
        return ["native", basename(stack[0].get("file")), norm.launch(stack[0].get("function", ""))]
    return ["none"]


def access_key(a, norm, ignore):
    if a is None:
        return None
    k = {
        "op": norm.launch(a.get("op", "")),
        "op_kind": a.get("op_kind", ""),
        "direction": a.get("direction", ""),
        "exact": a.get("exact", True),
        "by_signature": a.get("by_signature", False),
        "by_library_call": a.get("by_library_call", False),
        "stream": norm.label(a.get("stream_label", "")),
    }
    if "bytes" not in ignore:
        k["bytes"] = a.get("bytes")
    if "alloc" not in ignore:
        al = a.get("allocation") or {}
        k["alloc"] = [al.get("kind"), al.get("bytes")]
    if "site" not in ignore:
        k["site"] = site(a.get("stack"), norm)
    g = a.get("graph_launch")
    if g:
        k["graph_launch"] = {"api": norm.launch(g.get("api", "")), "stream": norm.label(g.get("stream_label", ""))}
        if "site" not in ignore:
            k["graph_launch"]["site"] = site(g.get("stack"), norm)
    return k


def finding_key(f, norm, ignore):
    acc = f.get("accesses") or [None, None]
    earlier, later = (acc + [None, None])[:2]
    k = {
        "kind": f.get("kind"),
        "confidence": f.get("confidence"),
        "mode": f.get("mode", "default"),
        "occurrences": f.get("occurrences"),
        "ranks": sorted(f.get("ranks") or []),
        "where": sorted([w.get("rank"), w.get("count")] for w in f.get("where") or []),
        "same_stream": bool(earlier and later and earlier.get("stream") == later.get("stream")),
        "earlier": access_key(earlier, norm, ignore),
        "later": access_key(later, norm, ignore),
        "released": access_key(f.get("released"), norm, ignore),
    }
    if "bytes" not in ignore:
        k["overlap_bytes"] = (f.get("overlap") or {}).get("bytes")
    return k


def dumps(x):
    return json.dumps(x, sort_keys=True, separators=(",", ":"))


def digest(report, rc, norm, ignore):
    """(core, notes): what decides SAME, and what is only shown."""
    core, notes = {}, {}
    if "exit" not in ignore:
        core["exit status"] = collections.Counter([str(rc)])
    core["findings"] = collections.Counter(dumps(finding_key(f, norm, ignore)) for f in report.get("findings", []))
    if "traces" not in ignore:
        core["traces"] = collections.Counter(
            dumps([t.get("rank"), norm.label(t.get("capture_status")), t.get("mode"), t.get("complete"),
                   t.get("truncated"), t.get("capture")]) for t in report.get("traces", []))
    if "graph" not in ignore:
        core["unanalysed graph launches"] = collections.Counter(
            [str((report.get("summary") or {}).get("unanalysed_graph_launches"))])
    if "notices" not in ignore:
        core["notices"] = collections.Counter(
            dumps([n.get("level"), NUM_RE.sub("N", norm.label(n.get("text")))]) for n in report.get("notices", []))
    notes["fingerprints"] = collections.Counter(f.get("fingerprint") for f in report.get("findings", []))
    notes["missing-edge/fix texts"] = collections.Counter(
        dumps([norm.text(f.get("missing_edge")), norm.text((f.get("fix") or {}).get("text"))])
        for f in report.get("findings", []))
    s = report.get("summary") or {}
    notes["records/accesses"] = collections.Counter([f"records={s.get('records')} accesses={s.get('accesses')}"])
    notes["notice texts"] = collections.Counter(norm.label(n.get("text")) for n in report.get("notices", []))
    return core, notes


def flatten(x, prefix=""):
    if isinstance(x, dict):
        out = {}
        for k, v in x.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else k))
        return out
    return {prefix: x}


def pair_key(item):
    """Findings that differ only in detail pair up by kind and both ops."""
    try:
        k = json.loads(item)
        return dumps([k.get("kind"), (k.get("earlier") or {}).get("op"), (k.get("later") or {}).get("op")])
    except (ValueError, AttributeError):
        return None


def headline(item):
    try:
        k = json.loads(item)
        return f"{k['kind']} {k['confidence']}: {(k['earlier'] or {}).get('op', '')[:60]} -> {(k['later'] or {}).get('op', '')[:60]}"
    except (ValueError, KeyError, TypeError, AttributeError):
        return item


def diff(a, b):
    """Lines for the multiset difference of two {field: Counter} digests. Findings of one kind
    and ops on both sides are shown as the fields that changed."""
    out = []
    for field in sorted(a.keys() | b.keys()):
        x, y = a.get(field, collections.Counter()), b.get(field, collections.Counter())
        if x == y:
            continue
        only_x, only_y = list((x - y).elements()), list((y - x).elements())
        if field == "findings":
            for ix in list(only_x):
                match = next((iy for iy in only_y if pair_key(iy) == pair_key(ix)), None)
                if match is None:
                    continue
                only_x.remove(ix)
                only_y.remove(match)
                fx, fy = flatten(json.loads(ix)), flatten(json.loads(match))
                changes = [f"{k}: {dumps(fx.get(k))} -> {dumps(fy.get(k))}" for k in sorted(fx.keys() | fy.keys())
                           if fx.get(k) != fy.get(k)]
                out.append(f"findings: changed ({headline(ix)}): " + "; ".join(changes))
        for item, n in sorted(collections.Counter(only_x).items()):
            out.append(f"{field}: committed only{f' (x{n})' if n > 1 else ''}: {item}")
        for item, n in sorted(collections.Counter(only_y).items()):
            out.append(f"{field}: re-recorded only{f' (x{n})' if n > 1 else ''}: {item}")
    return out


def analyze(sr, directory, flags):
    cmd = [sr, "analyze", "--no-color", "--format", "json", *flags, directory]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        return None, None, "analyze timed out (300 s)"
    try:
        return json.loads(p.stdout), p.returncode, None
    except json.JSONDecodeError:
        return None, p.returncode, f"analyze exit {p.returncode}, no JSON report: {p.stderr.strip()[-300:]}"


def flag_sets(case_dir):
    """The analyze options of each expected report of the case (tests/README.md)."""
    sets = []
    for p in sorted(glob.glob(os.path.join(case_dir, "expected*.json"))):
        parts = os.path.basename(p).split(".")
        if parts[0] != "expected" or parts[-1] != "json":
            continue
        sets.append(["--" + f for f in parts[1:-1]])
    return sets or [[]]


def safe_extract(tarball, dest):
    with tarfile.open(tarball) as tf:
        for m in tf.getmembers():
            name = os.path.normpath(m.name)
            if name.startswith(("/", "..")) or os.path.isabs(name) or not (m.isfile() or m.isdir()):
                raise ValueError(f"refusing tar member {m.name!r}")
        try:
            tf.extractall(dest, filter="data")
        except TypeError:  # Python < 3.12: members were checked above
            tf.extractall(dest)


def find_root(dest):
    """The directory that holds traces/ (the top, or one level down)."""
    if os.path.isdir(os.path.join(dest, "traces")):
        return dest
    for d in sorted(os.listdir(dest)):
        if os.path.isdir(os.path.join(dest, d, "traces")):
            return os.path.join(dest, d)
    return None


def read_summary(root):
    """{case: summary line} from logs/summary.txt."""
    out = {}
    p = os.path.join(root, "logs", "summary.txt")
    if os.path.exists(p):
        for line in open(p, errors="replace"):
            if line.strip() and not line.startswith("#"):
                name, _, rest = line.strip().partition(" ")
                out[name] = rest
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("tarball")
    ap.add_argument("streamrace", nargs="?", default=os.path.join(ROOT, "build", "bin", "streamrace"))
    ap.add_argument("--fixtures", default=os.path.join(ROOT, "tests", "data", "gpu"))
    ap.add_argument("--ignore", default="", help="comma-separated: " + ", ".join(sorted(IGNORABLE)))
    ap.add_argument("--strict", action="store_true", help="notes (fingerprints, texts, counts) decide too")
    ap.add_argument("-v", "--verbose", action="store_true", help="also show the notes of SAME cases")
    args = ap.parse_args(argv)
    ignore = {x for x in args.ignore.split(",") if x}
    if ignore - IGNORABLE:
        ap.error(f"unknown --ignore field(s): {', '.join(sorted(ignore - IGNORABLE))}")
    if not os.access(args.streamrace, os.X_OK):
        ap.error(f"no analyzer at {args.streamrace}")
    if not os.path.isdir(args.fixtures):
        ap.error(f"no fixtures at {args.fixtures}")

    tmp = tempfile.mkdtemp(prefix="compare_fixtures.")
    try:
        try:
            safe_extract(args.tarball, tmp)
        except (OSError, tarfile.TarError, ValueError) as e:
            print(f"cannot read {args.tarball}: {e}", file=sys.stderr)
            return 2
        root = find_root(tmp)
        if root is None:
            print(f"{args.tarball} has no traces/ directory", file=sys.stderr)
            return 2
        summary = read_summary(root)
        rerecorded = {d for d in os.listdir(os.path.join(root, "traces")) if os.path.isdir(os.path.join(root, "traces", d))}
        committed = {d for d in os.listdir(args.fixtures) if os.path.isfile(os.path.join(args.fixtures, d, "case.json"))}
        norm = Normaliser()
        print(f"analyzer: {args.streamrace}; committed: {args.fixtures}; re-recorded: {args.tarball}")
        print("op names compared modulo the launch API: cudaLaunchKernel*, cuLaunchKernel* "
              "(and cu[da]LaunchCooperativeKernel*) -> 'launch'"
              + (f"; ignored: {', '.join(sorted(ignore))}" if ignore else "")
              + ("; strict: notes decide" if args.strict else ""))
        counts = collections.Counter()
        for case in sorted(committed | rerecorded | set(summary)):
            rec = summary.get(case, "")
            rec_note = f" [run: {rec}]" if rec and not rec.startswith("SKIPPED") else ""
            if case not in committed:
                if case in rerecorded:
                    counts["SKIPPED"] += 1
                    print(f"SKIPPED   {case}: no committed fixture in {args.fixtures}")
                continue
            if case not in rerecorded:
                counts["SKIPPED"] += 1
                why = rec[len("SKIPPED "):] if rec.startswith("SKIPPED") else (rec or "not in the tarball")
                print(f"SKIPPED   {case}: {why}")
                continue
            new_dir = os.path.join(root, "traces", case)
            old_dir = os.path.join(args.fixtures, case)
            problems, note_lines, shown = [], [], []
            if not glob.glob(os.path.join(new_dir, "*.srace")):
                problems.append("the re-recording has no traces")
            else:
                for flags in flag_sets(old_dir):
                    tag = f" ({' '.join(flags)})" if flags else ""
                    norm.side = "committed"
                    old, old_rc, err_old = analyze(args.streamrace, old_dir, flags)
                    norm.side = "re-recorded"
                    new, new_rc, err_new = analyze(args.streamrace, new_dir, flags)
                    if err_old or err_new:
                        problems += [f"committed{tag}: {err_old}"] * bool(err_old) + [f"re-recorded{tag}: {err_new}"] * bool(err_new)
                        continue
                    norm.side = "committed"
                    old_core, old_notes = digest(old, old_rc, norm, ignore)
                    norm.side = "re-recorded"
                    new_core, new_notes = digest(new, new_rc, norm, ignore)
                    problems += [f"{tag.strip()} {d}".strip() for d in diff(old_core, new_core)]
                    note_lines += [f"{tag.strip()} {d}".strip() for d in diff(old_notes, new_notes)]
                    shown.append(f"exit {old_rc}/{new_rc}, {len(old.get('findings', []))}/{len(new.get('findings', []))} findings{tag}")
            if args.strict:
                problems += note_lines
                note_lines = []
            if problems:
                counts["DIFFERENT"] += 1
                what = f"{'; '.join(shown)} (committed/re-recorded)" if shown else "not compared"
                print(f"DIFFERENT {case}{rec_note}: {what}")
                for d in problems:
                    print(f"    {d}")
                for d in note_lines:
                    print(f"    note: {d}")
            else:
                counts["SAME"] += 1
                extra = f", {len(note_lines)} note(s)" if note_lines else ""
                print(f"SAME      {case}{rec_note}: {'; '.join(shown)} (committed/re-recorded){extra}")
                if args.verbose:
                    for d in note_lines:
                        print(f"    note: {d}")
        print(f"launch-name normalisation changed {norm.changed['committed']} committed and "
              f"{norm.changed['re-recorded']} re-recorded strings")
        compared = counts["SAME"] + counts["DIFFERENT"]
        print(f"total: {counts['SAME']} SAME, {counts['DIFFERENT']} DIFFERENT, {counts['SKIPPED']} SKIPPED "
              f"({compared} compared)")
        return 0 if compared and not counts["DIFFERENT"] else 1
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
