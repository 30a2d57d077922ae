# The Python loop of bench/python_stack_cost.sh (timed) and bench/python_stack_instructions.sh
# (counted under callgrind): at Python stack depth DEPTH, N calls of the tracer tests' fake NCCL
# framework (8 traced NCCL calls each) through ctypes; prints the microseconds per traced call.
#   python3 bench/python_stack_loop.py FRAMEWORK_SO N DEPTH held|released
# held: ctypes.PyDLL keeps the GIL, as a C extension that does not release it; released:
# ctypes.CDLL releases it, as PyTorch's ops do.
#   python3 bench/python_stack_loop.py FRAMEWORK_SO N DEPTH held|released alternate
# alternate: each loop turn makes 4 traced calls (one all-reduce each) from 4 different lines,
# so that no call is at the site of the call before it (the call-site cache's front, not its
# last-site shortcut); prints the microseconds per traced call likewise.
import ctypes
import sys
import time

lib = (ctypes.PyDLL if sys.argv[4] == "held" else ctypes.CDLL)(sys.argv[1], mode=ctypes.RTLD_LOCAL)
n = int(sys.argv[2])
alternate = len(sys.argv) > 5 and sys.argv[5] == "alternate"
CALLS_PER_TURN = 4 if alternate else 8


def turns():
    if alternate:
        one = lib.fake_framework_allreduce
        for _ in range(n):
            one()
            one()
            one()
            one()
    else:
        for _ in range(n):
            lib.fake_framework_run()


def deep(k):
    if k == 0:
        t = time.perf_counter()
        turns()
        return time.perf_counter() - t
    return deep(k - 1)


print(f"{deep(int(sys.argv[3])) / (n * CALLS_PER_TURN) * 1e6:.3f}")
