#!/usr/bin/env bash
# GPU machine: builds liblaunch_probe.so and the probe app, runs the app and a few PyTorch
# launches under it; prints what each launch looks like at the runtime and driver levels.
set -u
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
W=${WORK:-/tmp/launch_probe}
mkdir -p "$W"
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
CUPTI_INC=$CUDA_HOME/extras/CUPTI/include
[ -f "$CUPTI_INC/cupti.h" ] || CUPTI_INC=$CUDA_HOME/include
g++ -O2 -std=c++17 -shared -fPIC -I"$CUPTI_INC" -I"$CUDA_HOME/include" -o "$W/liblaunch_probe.so" "$HERE/launch_probe.cpp" -ldl || exit 1
nvcc -O2 -arch=sm_90 -cudart shared -c -o "$W/probe_ptsz.o" --default-stream per-thread "$HERE/probe_ptsz.cu" || exit 1
nvcc -O2 -arch=sm_90 -cudart shared -o "$W/probe_app" "$HERE/probe_app.cu" "$W/probe_ptsz.o" || exit 1
echo "== CUDA program"
CUDA_INJECTION64_PATH=$W/liblaunch_probe.so "$W/probe_app"
echo "== PyTorch: add_ on the default stream, on a side stream, torch.cuda.set_stream(side)"
CUDA_INJECTION64_PATH=$W/liblaunch_probe.so LAUNCH_PROBE_MAX=400 python3 - <<'PY' 2>&1 | grep -v "symbol=$" | tail -40
import torch
x = torch.zeros(16, device="cuda")
torch.cuda.synchronize()
print("torch: default stream", hex(torch.cuda.current_stream().cuda_stream), flush=True)
for _ in range(2): x.add_(1)
torch.cuda.synchronize()
s = torch.cuda.Stream()
print("torch: side stream", hex(s.cuda_stream), flush=True)
with torch.cuda.stream(s):
    for _ in range(2): x.add_(1)
torch.cuda.synchronize()
print("torch: done", flush=True)
PY
