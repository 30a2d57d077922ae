export LD_LIBRARY_PATH=/usr/local/cuda/compute-sanitizer:/usr/local/cuda/lib64:$LD_LIBRARY_PATH
SR=$PWD/gpu-carry-precise/bin/streamrace
for name in untraced targeted all; do
  case $name in
    untraced) cmd=(python3 bench/tracer_overhead.py 20);;
    targeted) cmd=("$SR" run --no-color -o /tmp/bt --precise=layer_norm -- python3 bench/tracer_overhead.py 20);;
    all) cmd=("$SR" run --no-color -o /tmp/ba --precise=all -- python3 bench/tracer_overhead.py 20);;
  esac
  t0=$SECONDS; STREAMRACE_PRECISE_DEBUG=1 timeout 150 "${cmd[@]}" > $OUT/bench_$name.log 2>&1
  echo "bench $name rc=$? secs=$((SECONDS-t0)) $(grep -h median_step_ms $OUT/bench_$name.log) $(grep -h 'streamrace (pid' $OUT/bench_$name.log | head -1)" | tee -a $OUT/bench_summary.txt
done
