#!/usr/bin/env bash
# bench/launch_replay on the corpora recorded on the GPU machine (bench/data/, by
# bench/record_launch_corpus.sh): each reads, its launches replayed through the call handler
# find the pointers the tracer found there, launch for launch; bad corpora exit 2 naming the file.
#   launch_replay_test.sh REPLAY_BIN REPO
set -uo pipefail
bin=$1
repo=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
check() {  # name, expected exit status, expected line, command...
  local name=$1 want_rc=$2 want=$3
  shift 3
  local out rc
  out=$("$@" 2>&1)
  rc=$?
  if [[ $rc == "$want_rc" ]] && grep -qxF -- "$want" <<<"$out"; then echo "ok   $name"
  else echo "FAIL $name: exit $rc (want $want_rc), want the line: $want"; echo "$out" | sed 's/^/     /'; fail=1; fi
}
z=$repo/bench/data/zero2_h200.corpus.zst
l=$repo/bench/data/launch_loop_h200.corpus.zst
check "zero2 corpus reads" 0 \
  "corpus $z: 8000 launches of 87 functions, 721 parameter bytes per launch, 163 allocations in the table" "$bin" "$z" 8000
check "zero2 pointers as on the GPU" 0 "pointers found: as on the GPU machine in 8000 of 8000 launches" "$bin" "$z" 8000
check "launch loop pointers as on the GPU" 0 "pointers found: as on the GPU machine in 4000 of 4000 launches" "$bin" "$l" 4000
check "cold blocks replay half the launches" 0 "pointers found: as on the GPU machine in 2000 of 2000 launches" "$bin" "$l" 4000 64
check "missing corpus" 2 "streamrace-launch-replay: $tmp/none cannot be read" "$bin" "$tmp/none"
printf 'streamrace-launch-corpus 2\n' > "$tmp/v2"
check "other version" 2 \
  "streamrace-launch-replay: $tmp/v2 line 1: not a launch corpus of version 1 (its first line is 'streamrace-launch-corpus 1')" "$bin" "$tmp/v2"
printf 'streamrace-launch-corpus 1\nfunc 0 f00d 2 0:4 8:8 _Z1kiPf\nlaunch 0 1 1 1 1 32 1 1 0d0c0b0a\n' > "$tmp/short"
check "bytes not matching the layout" 2 \
  "streamrace-launch-replay: $tmp/short line 3: a launch's bytes do not match its function's layout" "$bin" "$tmp/short"
printf 'streamrace-launch-corpus 1\nlaunch 0 1 1 1 1 32 1 1 00\n' > "$tmp/nofunc"
check "launch of no func" 2 \
  "streamrace-launch-replay: $tmp/nofunc line 2: a launch line is 'launch ID NPTRS GX GY GZ BX BY BZ HEX' of a func before it" "$bin" "$tmp/nofunc"
printf 'streamrace-launch-corpus 1\n' > "$tmp/empty"
check "no launch" 2 "streamrace-launch-replay: $tmp/empty holds no launch" "$bin" "$tmp/empty"
head -c 20000 "$z" > "$tmp/cut.zst"
check "truncated zstd" 2 "streamrace-launch-replay: $tmp/cut.zst does not decompress: truncated or too large" "$bin" "$tmp/cut.zst"
exit $fail
