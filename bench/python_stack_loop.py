# The Python loop of bench/python_stack_cost.sh (timed) and bench/python_stack_instructions.sh
# (counted under callgrind): at Python stack depth DEPTH, N calls of the tracer tests' fake NCCL
# framework (8 traced NCCL calls each) through ctypes; prints the microseconds per traced call.
#   python3 bench/python_stack_loop.py FRAMEWORK_SO N DEPTH held|released
# held: ctypes.PyDLL keeps the GIL, as a C extension that does not release it; released:
# ctypes.CDLL releases it, as PyTorch's ops do.
import ctypes
import sys
import time

lib = (ctypes.PyDLL if sys.argv[4] == "held" else ctypes.CDLL)(sys.argv[1], mode=ctypes.RTLD_LOCAL)
n = int(sys.argv[2])


def deep(k):
    if k == 0:
        t = time.perf_counter()
        for _ in range(n):
            lib.fake_framework_run()
        return time.perf_counter() - t
    return deep(k - 1)


print(f"{deep(int(sys.argv[3])) / (n * 8) * 1e6:.3f}")
