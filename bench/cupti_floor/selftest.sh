#!/usr/bin/env bash
# CPU-only check (CUPTI domains: driver = 1, runtime = 2) of libcupti_floor.so: builds it and a fake libcupti.so that logs what the
# subscriber enables, calls InitializeInjection() through dlopen as the CUDA driver would, and
# checks each mode's outcome. No GPU, no CUDA driver needed (CUPTI headers are).
#
#   bash bench/cupti_floor/selftest.sh
set -euo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
T="$(mktemp -d)"
trap 'rm -rf "$T"' EXIT
built="$(bash "$HERE/build.sh" "$T" 2>/dev/null)"
CUPTI_INC="$(sed -n 's/.*CUPTI headers \(.*\))$/\1/p' <<<"$built")"
cat > "$T/fake_cupti.cpp" <<'CPP'
#include <cupti.h>
#include <cstdio>
extern "C" {
CUptiResult cuptiSubscribe(CUpti_SubscriberHandle* s, CUpti_CallbackFunc, void*) { *s = (CUpti_SubscriberHandle)1; return CUPTI_SUCCESS; }
CUptiResult cuptiSubscribe_v2(CUpti_SubscriberHandle* s, CUpti_CallbackFunc, void*, CUpti_SubscriberParams* p) {
  std::printf("subscribe_v2 %s\n", p && p->subscriberName ? p->subscriberName : "-"); *s = (CUpti_SubscriberHandle)1; return CUPTI_SUCCESS; }
CUptiResult cuptiEnableCallback(uint32_t e, CUpti_SubscriberHandle, CUpti_CallbackDomain d, CUpti_CallbackId id) {
  std::printf("callback %u %u %u\n", e, (unsigned)d, (unsigned)id); return CUPTI_SUCCESS; }
CUptiResult cuptiEnableDomain(uint32_t e, CUpti_SubscriberHandle, CUpti_CallbackDomain d) { std::printf("domain %u %u\n", e, (unsigned)d); return CUPTI_SUCCESS; }
CUptiResult cuptiGetResultString(CUptiResult, const char** s) { *s = "fake"; return CUPTI_SUCCESS; }
}
CPP
g++ -shared -fPIC -I"$CUPTI_INC" -o "$T/libfakecupti.so" "$T/fake_cupti.cpp"
cat > "$T/driver.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  void* h = dlopen(getenv("CUDA_INJECTION64_PATH"), RTLD_NOW);
  if (!h) { printf("dlopen: %s\n", dlerror()); return 2; }
  int (*init)(void) = (int (*)(void))dlsym(h, "InitializeInjection");
  if (!init) { printf("no InitializeInjection\n"); return 2; }
  return init() == 1 ? 0 : 3;
}
C
gcc -o "$T/driver" "$T/driver.c" -ldl
run() { env CUDA_INJECTION64_PATH="$T/libcupti_floor.so" CUPTI_FLOOR_LIBCUPTI="$T/libfakecupti.so" "$@" "$T/driver" 2>&1; }
fail=0
expect() {  # name output pattern...
    local name=$1 out=$2; shift 2
    for pat in "$@"; do
        if ! grep -qE -- "$pat" <<<"$out"; then echo "FAIL $name: no /$pat/ in:"; printf '    %s\n' "${out//$'\n'/$'\n'    }"; fail=1; return; fi
    done
    echo "ok   $name"
}
rt_launch=$(grep -E 'CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000 *=' "$CUPTI_INC/cupti_runtime_cbid.h" | sed 's/.*= *\([0-9]*\).*/\1/')
dr_launch=$(grep -E 'CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel *=' "$CUPTI_INC/cupti_driver_cbid.h" | sed 's/.*= *\([0-9]*\).*/\1/')
expect domains "$(run)" "subscribe_v2 cupti_floor" "^domain 1 1$" "^domain 1 2$" "mode domains, 2 domains enabled"
expect cbids-names "$(run CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS=runtime:cudaLaunchKernel_v7000,driver:cuLaunchKernel)" \
    "^callback 1 2 $rt_launch$" "^callback 1 1 $dr_launch$" "2 callback ids enabled"
expect cbids-unversioned "$(run CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS='runtime:cudaLaunchKernel')" "^callback 1 2 $rt_launch$" "1 callback ids enabled"
expect cbids-numbers "$(run CUPTI_FLOOR_MODE=cbids 'CUPTI_FLOOR_CBIDS=runtime:211 driver:17')" "^callback 1 2 211$" "^callback 1 1 17$"
printf 'runtime:cudaMalloc_v3020  # a comment\n\ndriver:cuMemAlloc_v2, driver:cuLaunchKernel_ptsz\n' > "$T/list"
expect cbids-file "$(run CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS=@"$T/list")" "3 callback ids enabled"
expect cbids-unknown "$(run CUPTI_FLOOR_MODE=cbids CUPTI_FLOOR_CBIDS=driver:cuNoSuchCall)" "no such callback id.*nothing enabled"
expect cbids-unset "$(run CUPTI_FLOOR_MODE=cbids)" "CUPTI_FLOOR_CBIDS is not set"
expect none "$(run CUPTI_FLOOR_MODE=none)" "subscribe_v2" "mode none, 0"
expect bad-mode "$(run CUPTI_FLOOR_MODE=bogus)" "is not domains, cbids or none"
expect quiet "$(run CUPTI_FLOOR_QUIET=1; echo "rc=$?")" "^rc=0$"
out=$(run CUPTI_FLOOR_QUIET=1)
if [[ "$out" != *cupti_floor:* ]]; then echo "ok   quiet-silent"; else echo "FAIL quiet-silent: $out"; fail=1; fi
exit $fail
