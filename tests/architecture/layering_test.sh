#!/usr/bin/env bash
# The layers (docs/architecture.md): each folder may include only the folders listed for it.
# traceformat is the bottom; the analyzer reads traces only through it; report draws what the
# analyzer found (never a trace); replay builds on the analyzer; the tracer shares only the
# trace format; cli and bench sit on top.
set -euo pipefail
root="${1:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
declare -A allowed=(
  [traceformat]="traceformat"
  [analyzer]="traceformat analyzer"
  [report]="analyzer report"
  [replay]="traceformat analyzer replay"
  [tracer]="traceformat tracer"
  [bench]="traceformat analyzer replay tracer bench"
  [cli]="traceformat analyzer report replay tracer cli"
)
bad=0
for layer in "${!allowed[@]}"; do
  [ -d "$root/$layer" ] || continue
  while IFS= read -r line; do
    file="${line%%:*}"
    target=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$line")
    case " ${allowed[$layer]} " in
      *" $target "*) ;;
      *) echo "layering: $file includes $target/ (allowed for $layer/: ${allowed[$layer]})"; bad=1 ;;
    esac
  done < <(cd "$root" && grep -rnE '^[[:space:]]*#[[:space:]]*include "[a-z_]+/' "$layer" \
             --include='*.h' --include='*.cpp' --include='*.cu' --include='*.cuh' || true)
done
if [ "$bad" = 0 ]; then echo "layering: every include stays within its layer's allowed folders"; fi
exit "$bad"
