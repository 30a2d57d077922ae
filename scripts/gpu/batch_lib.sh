# Shared by the GPU batch scripts (source it; bash): the deadline, one run with its summary
# line, the NCCL compile flags. Expects $R (the batch's scratch directory), $S (its summary
# file) and $START (seconds since the epoch) set, and DEADLINE_S (seconds for the whole batch).
#
#   ONE_GREP   extended regex: the lines of a run's log its summary line quotes
#   ONE_CUT    how many characters of them (default 600)
#   ONE_MARGIN seconds a run needs beyond its timeout to be started (default 10)

# Seconds left of the batch's deadline.
left() { echo $(( DEADLINE_S - ($(date +%s) - START) )); }

# one NAME TIMEOUT CMD... : runs CMD under `timeout` with its output in $R/runs/NAME/log.txt
# and appends "NAME rc=N secs=N <quoted lines>" to $S, or "NAME skipped (deadline)".
one() {
  local name=$1 to=$2; shift 2
  if [ "$(left)" -lt $(( to + ${ONE_MARGIN:-10} )) ]; then echo "$name skipped (deadline)" >> "$S"; return; fi
  local dir="$R/runs/$name"; mkdir -p "$dir"
  local t0; t0=$(date +%s)
  timeout -k 5 "$to" "$@" > "$dir/log.txt" 2>&1
  local rc=$?
  local lines; lines=$(grep -E "$ONE_GREP" "$dir/log.txt" | tr '\n' ' ' | cut -c1-"${ONE_CUT:-600}")
  echo "$name rc=$rc secs=$(( $(date +%s) - t0 )) $lines" >> "$S"
}

# The nvcc flags that build an NCCL sample against the toolkit's NCCL or the wheel's.
nccl_nvcc_flags() {
  local pynccl; pynccl=$(python3 -c 'import nvidia.nccl; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null)
  local inc=/usr/local/cuda/include; [ -f $inc/nccl.h ] || inc=$pynccl/include
  local lib=/usr/local/cuda/lib64; ls $lib/libnccl.so* >/dev/null 2>&1 || lib=$pynccl/lib
  mkdir -p /tmp/ncclink; ln -sf "$lib"/libnccl.so.2 /tmp/ncclink/libnccl.so
  echo "-I$inc -L/tmp/ncclink -lnccl -Xlinker -rpath,$lib"
}
