#!/usr/bin/env bash
# The CUPTI callback ids the tracer enables by default, as CUPTI_FLOOR_CBIDS lines
# (runtime:NAME, driver:NAME; cupti_floor.cpp), read from its call table: every row of
# tracer/cuda_call_table.cpp but the runtime's kernel launches, which the tracer enables only
# with the setting runtime_launches (`--runtime-launches`: RUNTIME_LAUNCHES=1 adds them here).
# Rows are SR_RT(ID, ...) (runtime), SR_DR(ID, ...) and SR_DRL(ID, ...) (driver, SR_DRL the
# kernel launches of the lean path). A row of any other macro is an error (exit 2): a floor that
# leaves out some of the tracer's callbacks measures less than the tracer pays (from 06bfe67 to
# session 39 the list lacked SR_DRL's four launch rows, and the floor took no launch callbacks).
#
#   bash bench/cupti_floor/tracer_cbids.sh [TABLE]     (default: the repository's call table)
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
TABLE="${1:-$HERE/../../tracer/cuda_call_table.cpp}"
[[ -r "$TABLE" ]] || { echo "tracer_cbids.sh: $TABLE: cannot read the call table" >&2; exit 2; }
unknown=$(grep -nE '^[[:space:]]*SR_[A-Z]+\(' "$TABLE" | grep -vE '^[0-9]+:[[:space:]]*SR_(RT|DR|DRL)\(' || true)
if [[ -n "$unknown" ]]; then
  echo "tracer_cbids.sh: $TABLE: rows of a macro this script does not know (extend it):" >&2
  echo "$unknown" >&2
  exit 2
fi
launches=${RUNTIME_LAUNCHES:-0}
out=$(sed -nE "$([[ "$launches" == 1 ]] || echo '/^[[:space:]]*SR_RT\([A-Za-z0-9_]+, "[^"]*", kKernelLaunch,/d;')
    s/^[[:space:]]*SR_RT\(([A-Za-z0-9_]+),.*/runtime:\1/p
    s/^[[:space:]]*SR_DRL?\(([A-Za-z0-9_]+),.*/driver:\1/p" "$TABLE")
[[ -n "$out" ]] || { echo "tracer_cbids.sh: $TABLE: no rows found" >&2; exit 2; }
echo "$out"
