// Call chains of several frame shapes for the native unwinder test, compiled twice: once
// with frame pointers and once without (see tests/tracer/CMakeLists.txt). SHAPES_NS names
// the copy. Every function is noinline and does work after its call, so no frame is elided.
#include <alloca.h>

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace SHAPES_NS {

using Leaf = void (*)(void*);

__attribute__((noinline)) int plain(int depth, Leaf leaf, void* arg) {
  if (depth == 0) {
    leaf(arg);
    return 1;
  }
  volatile int x = depth;
  return plain(depth - 1, leaf, arg) + x;
}

// A variable-size frame: the compiler needs a frame pointer for it in both builds.
__attribute__((noinline)) int with_alloca(int depth, size_t bytes, Leaf leaf, void* arg) {
  char* buf = static_cast<char*>(alloca(bytes));
  std::memset(buf, depth, bytes);
  int r = depth == 0 ? (leaf(arg), 1) : with_alloca(depth - 1, bytes + 40, leaf, arg);
  return r + buf[bytes / 2];
}

// A large fixed frame.
__attribute__((noinline)) int big_frame(int depth, Leaf leaf, void* arg) {
  volatile char buf[3000];
  buf[depth] = char(depth);
  int r = depth == 0 ? (leaf(arg), 1) : big_frame(depth - 1, leaf, arg);
  return r + buf[depth];
}

__attribute__((noinline)) int mixed(int depth, Leaf leaf, void* arg) {
  switch (depth % 3) {
    case 0: return plain(depth / 3, leaf, arg) + 1;
    case 1: return with_alloca(depth / 3, 24 + depth, leaf, arg) + 2;
    default: return big_frame(depth / 3, leaf, arg) + 3;
  }
}

}  // namespace SHAPES_NS
