#!/usr/bin/env bash
# A short precise-mode check for the GPU machine: the exact ranges of the CUDA and PyTorch
# views samples (must stay 1 MiB overlaps), then the slowdown benchmark (untraced, targeted,
# all). Uses the build carried in gpu-carry-precise/.
export LD_LIBRARY_PATH=/usr/local/cuda/compute-sanitizer:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
SR=$PWD/gpu-carry-precise/bin/streamrace
OUT=${OUT:-/tmp/out}
nvcc -O2 -arch=sm_90 -cudart shared -o /tmp/views samples/precise/views.cu -Xlinker -rpath,/usr/local/cuda/lib64
for c in "views:/tmp/views racy" "torch_views:python3 samples/precise/torch_views.py views_racy"; do
  name=${c%%:*}; cmd=${c#*:}
  timeout 90 "$SR" run --no-color -o "/tmp/chk_$name" --precise=all -- $cmd > "$OUT/chk_$name.log" 2>&1
  echo "$name rc=$? $(grep -h 'race (certain) on' "$OUT/chk_$name.log" | head -1)"
done
bash scripts/gpu/precise_bench_only.sh
