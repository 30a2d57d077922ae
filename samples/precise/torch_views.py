"""Precise mode's PyTorch samples (issue 7). One process per case:

  views_racy      two overlapping narrow() views of one flat buffer: a side stream fills
                  [0, N/2), the default stream then sums [N/4, 3N/4) without waiting.
  views_clean     the same, the default stream waits on the side stream first.
  raw_racy        a raw CUDA kernel (NVRTC-compiled and launched with cuLaunchKernel, as a
                  CuPy RawKernel is) writes a PyTorch tensor on a side stream; the default
                  stream reads the tensor without waiting.
  raw_clean       the same, ordered with wait_stream.
  readread        a side stream and the default stream both sum one tensor (clean).
  disjoint        two side streams fill disjoint slices of one buffer (clean).
  gemm_in_racy    a side stream fills a bf16 matrix; the default stream multiplies it (cuBLAS
                  GEMM reading it) without waiting. Checks that precise mode sees a GEMM's loads.
  gemm_in_clean   the same, the default stream waits on the side stream first.
  gemm_out_racy   the default stream's GEMM writes its output; a side stream sums the output
                  without waiting. Checks that precise mode sees a GEMM's stores.
  gemm_out_clean  the same, the side stream waits on the default stream first.

Run: python3 torch_views.py CASE   (under `streamrace run [--precise] --`).
"""
import ctypes
import glob
import os
import sys

import torch

N = 1 << 20  # 4 MiB of float32

RAW_SRC = rb"""
extern "C" __global__ void raw_fill(float* p, int n, float v) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) p[i] = v;
}
"""


def _load_nvrtc():
    here = os.path.dirname(torch.__file__)
    cands = glob.glob(os.path.join(here, "..", "nvidia", "cu13", "lib", "libnvrtc.so*"))
    cands += glob.glob(os.path.join(here, "..", "nvidia", "cuda_nvrtc", "lib", "libnvrtc.so*"))
    cands += glob.glob("/usr/local/cuda/lib64/libnvrtc.so*")
    for c in sorted(cands, key=len):
        if "builtins" in c:
            continue
        try:
            return ctypes.CDLL(c)
        except OSError:
            pass
    raise RuntimeError("libnvrtc not found")


class RawKernel:
    """A minimal CuPy-RawKernel equivalent: NVRTC to a cubin, the driver API to launch."""

    def __init__(self, src, name):
        nvrtc = _load_nvrtc()
        cuda = ctypes.CDLL("libcuda.so.1")
        prog = ctypes.c_void_p()
        assert nvrtc.nvrtcCreateProgram(ctypes.byref(prog), src, b"raw.cu", 0, None, None) == 0
        major, minor = torch.cuda.get_device_capability()
        opt = f"--gpu-architecture=sm_{major}{minor}".encode()
        opts = (ctypes.c_char_p * 1)(opt)
        if nvrtc.nvrtcCompileProgram(prog, 1, opts) != 0:
            size = ctypes.c_size_t()
            nvrtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
            log = ctypes.create_string_buffer(size.value)
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError(log.value.decode())
        size = ctypes.c_size_t()
        assert nvrtc.nvrtcGetCUBINSize(prog, ctypes.byref(size)) == 0
        self.cubin = ctypes.create_string_buffer(size.value)
        assert nvrtc.nvrtcGetCUBIN(prog, self.cubin) == 0
        torch.cuda.init()
        torch.zeros(1, device="cuda")  # the primary context is current from here on
        self.module = ctypes.c_void_p()
        assert cuda.cuModuleLoadData(ctypes.byref(self.module), self.cubin) == 0
        self.func = ctypes.c_void_p()
        assert cuda.cuModuleGetFunction(ctypes.byref(self.func), self.module, name.encode()) == 0
        self.cuda = cuda

    def __call__(self, grid, block, stream, ptr, n, value):
        p = ctypes.c_void_p(ptr)
        cn = ctypes.c_int(n)
        cv = ctypes.c_float(value)
        args = (ctypes.c_void_p * 3)(ctypes.addressof(p), ctypes.addressof(cn), ctypes.addressof(cv))
        rc = self.cuda.cuLaunchKernel(self.func, grid, 1, 1, block, 1, 1, 0, ctypes.c_void_p(stream), args, None)
        assert rc == 0, f"cuLaunchKernel: {rc}"


def main():
    case = sys.argv[1] if len(sys.argv) > 1 else "views_racy"
    torch.cuda.set_device(0)
    side = torch.cuda.Stream()
    side2 = torch.cuda.Stream()
    main_stream = torch.cuda.current_stream()
    raw = RawKernel(RAW_SRC, "raw_fill") if case.startswith("raw") else None
    buf = torch.zeros(N, device="cuda")
    out = None
    if case in ("views_racy", "views_clean"):
        side.wait_stream(main_stream)
        with torch.cuda.stream(side):
            buf.narrow(0, 0, N // 2).fill_(1.0)
        if case == "views_clean":
            main_stream.wait_stream(side)
        out = buf.narrow(0, N // 4, N // 2).sum()
    elif case in ("raw_racy", "raw_clean"):
        side.wait_stream(main_stream)
        raw(256, 256, side.cuda_stream, buf.data_ptr(), N, 3.0)
        if case == "raw_clean":
            main_stream.wait_stream(side)
        out = buf.sum()
    elif case == "readread":
        side.wait_stream(main_stream)
        with torch.cuda.stream(side):
            a = buf.sum()
        b = buf.sum()
        main_stream.wait_stream(side)
        out = a + b
    elif case == "disjoint":
        side.wait_stream(main_stream)
        side2.wait_stream(main_stream)
        with torch.cuda.stream(side):
            buf.narrow(0, 0, N // 2).fill_(1.0)
        with torch.cuda.stream(side2):
            buf.narrow(0, N // 2, N // 2).fill_(2.0)
        main_stream.wait_stream(side)
        main_stream.wait_stream(side2)
        out = buf.sum()
    elif case in ("gemm_in_racy", "gemm_in_clean"):
        a = torch.zeros(1024, 1024, device="cuda", dtype=torch.bfloat16)
        b = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16)
        side.wait_stream(main_stream)
        with torch.cuda.stream(side):
            a.fill_(1.0)
        if case == "gemm_in_clean":
            main_stream.wait_stream(side)
        out = (a @ b).float().sum()
    elif case in ("gemm_out_racy", "gemm_out_clean"):
        a = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16)
        b = torch.ones(1024, 1024, device="cuda", dtype=torch.bfloat16)
        c = torch.empty(1024, 1024, device="cuda", dtype=torch.bfloat16)
        torch.mm(a, b, out=c)
        if case == "gemm_out_clean":
            side.wait_stream(main_stream)
        with torch.cuda.stream(side):
            out = c.float().sum()
        main_stream.wait_stream(side)
    else:
        sys.exit(f"unknown case {case}")
    torch.cuda.synchronize()
    print(f"torch_views {case} done ({out.item():g})")


if __name__ == "__main__":
    main()
