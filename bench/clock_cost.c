// What reading the time costs on this machine (issue 12: every record takes clock_gettime,
// self_time takes the time-stamp counter): ns per call of clock_gettime(CLOCK_MONOTONIC),
// of __rdtsc, and the kernel's clock source. Build: gcc -O2 -o clock_cost bench/clock_cost.c
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <x86intrin.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}

int main(void) {
  const int n = 2000000;
  struct timespec t;
  volatile uint64_t sink = 0;
  double t0 = now();
  for (int i = 0; i < n; ++i) {
    clock_gettime(CLOCK_MONOTONIC, &t);
    sink += t.tv_nsec;
  }
  double t1 = now();
  for (int i = 0; i < n; ++i) sink += __rdtsc();
  double t2 = now();
  char src[64] = "?";
  FILE* f = fopen("/sys/devices/system/clocksource/clocksource0/current_clocksource", "r");
  if (f) {
    if (fscanf(f, "%63s", src) != 1) src[0] = '?';
    fclose(f);
  }
  printf("clock_gettime_ns %.1f\nrdtsc_ns %.1f\nclocksource %s\n", (t1 - t0) / n, (t2 - t1) / n, src);
  return (int)(sink & 0);
}
