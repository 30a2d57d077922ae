#!/usr/bin/env bash
# bench/launch_replay's ns per launch, on the machine it runs on (the GPU machine's host CPU is
# the one that matters), for each replay build given and each corpus, with the handler's data
# and code warm, with COLD_CODE_KIB of other code run between launches, with COLD_KIB of other
# memory written between them, and with both; ROUNDS rounds, builds interleaved in each.
#
#   bench/launch_replay_matrix.sh "NAME=DIR ..." "CORPUS ..."
#
# DIR holds streamrace-launch-replay and its shared object (scripts/gpu/build_carry.sh's
# gpu-carry/bench). Env: ROUNDS (3), COLD_CODE_KIB (256), COLD_KIB (512), LAUNCHES (40000).
set -uo pipefail
builds=$1
corpora=$2
ROUNDS=${ROUNDS:-3}
code=${COLD_CODE_KIB:-256}
data=${COLD_KIB:-512}
n=${LAUNCHES:-40000}
echo "host: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cpus"
printf '%s\t%s\t%s\t%s\t%s\n' round build corpus mode ns_per_launch
for r in $(seq 1 "$ROUNDS"); do
  for c in $corpora; do
    for b in $builds; do
      name=${b%%=*}
      dir=${b#*=}
      run() { LD_LIBRARY_PATH="$dir" "$dir/streamrace-launch-replay" "$c" "$@" | grep -o '[0-9.-]* ns \(added \)\?per launch' | cut -d' ' -f1; }
      printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$(basename "$c")" warm "$(run $((5 * n)))"
      printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$(basename "$c")" cold_code "$(run "$n" 0 "$code")"
      printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$(basename "$c")" cold_data "$(run "$n" "$data" 0)"
      printf '%s\t%s\t%s\t%s\t%s\n' "$r" "$name" "$(basename "$c")" cold_both "$(run "$n" "$data" "$code")"
    done
  done
done
