// Loads the fake framework with RTLD_LOCAL (as Python loads PyTorch) and runs it.
#include <dlfcn.h>

#include <cstdio>

int main(int argc, char** argv) {
  if (argc < 2) return 64;
  void* h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    std::fprintf(stderr, "%s\n", dlerror());
    return 65;
  }
  auto run = reinterpret_cast<int (*)()>(dlsym(h, "fake_framework_run"));
  return run ? run() : 66;
}
