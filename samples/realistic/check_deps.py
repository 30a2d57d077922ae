"""Check that the carried wheels' needs are met by the GPU image plus the carried wheels.

    python3 samples/realistic/check_deps.py .whl/realistic [--kinds-md PATH]

For every wheel in the folder (the DeepSpeed wheels, pydantic and its helpers), every
Requires-Dist that applies on the GPU machine (Python 3.12, Linux x86_64, no extras) must be
met by a carried wheel of a matching version, or by a package of the GPU image. The image's
package names come from the device KINDS.md list (read 2026-11-17; --kinds-md reads a newer
copy); versions are known for a few of them only (KINDS.md's pip-list row), so an image
package with an unknown version counts as meeting any version spec, and the script says so.
Exit 0 when all needs are met, 1 otherwise. Runs anywhere (no GPU, only pip's packaging).
"""
import argparse
import pathlib
import re
import sys
import zipfile

try:
    from packaging.markers import Marker  # noqa: F401
    from packaging.requirements import Requirement
    from packaging.version import Version
except ImportError:  # pip always carries a copy
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import Version

# The 'cuda' image of the nvidia-h200 kinds (device KINDS.md, as read on 2026-11-17).
IMAGE_PACKAGES = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch
build certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage
cuda-bindings cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops
equinox etils execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch
grpcio h11 h5py hf-xet httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig
interface-meta jax jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver
lazy-loader lightning lightning-utilities linear-operator lineax llvmlite lxml markdown
markdown-it-py markupsafe matplotlib mdurl meson ml-dtypes mpi4py mpmath msgpack multidict
multipledispatch mypy-extensions nanobind narwhals networkx ninja numba numba-cuda numpy numpyro
nvidia-cublas nvidia-cuda-cupti nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13
nvidia-cufft nvidia-cufile nvidia-curand nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13
nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir
onnxruntime onnxscript opencv-python-headless optax opt-einsum opt-einsum-fx optimistix
orbax-checkpoint packaging pandas pathspec patsy peft pillow pip pluggy portalocker
prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments pyparsing
pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton
typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp
""".split()
# Versions seen there (KINDS.md's pip-list row, 2026-11).
IMAGE_VERSIONS = {"torch": "2.11.0", "numpy": "2.5.2", "transformers": "5.17.0", "accelerate": "1.15.0",
                  "triton": "3.6.0", "safetensors": "0.8.0", "tokenizers": "0.23.2", "huggingface-hub": "1.33.0"}
# The GPU machine's interpreter, for environment markers.
GPU_ENV = {"python_version": "3.12", "python_full_version": "3.12.3", "implementation_name": "cpython",
           "platform_python_implementation": "CPython", "sys_platform": "linux", "platform_system": "Linux",
           "platform_machine": "x86_64", "os_name": "posix", "extra": ""}


def canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_meta(path: pathlib.Path):
    with zipfile.ZipFile(path) as z:
        meta = next(n for n in z.namelist() if n.endswith(".dist-info/METADATA"))
        text = z.read(meta).decode()
    name = version = None
    reqs = []
    for line in text.splitlines():
        if line.startswith("Name:"):
            name = canon(line.split(":", 1)[1].strip())
        elif line.startswith("Version:"):
            version = line.split(":", 1)[1].strip()
        elif line.startswith("Requires-Dist:"):
            reqs.append(Requirement(line.split(":", 1)[1].strip()))
        elif not line.strip():
            break  # end of headers
    return name, version, reqs


def image_packages(kinds_md):
    if kinds_md is None:
        return set(IMAGE_PACKAGES)
    text = pathlib.Path(kinds_md).read_text()
    m = re.search(r"Packages: (.*?)\.\s*$", text, re.M)
    if not m:
        sys.exit(f"check_deps.py: no 'Packages:' list in {kinds_md}")
    return {canon(p) for p in m.group(1).split(", ")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=pathlib.Path)
    ap.add_argument("--kinds-md", help="read the image's package list from this KINDS.md instead")
    a = ap.parse_args()
    wheels = sorted(a.folder.glob("*.whl"))
    if not wheels:
        print(f"check_deps.py: no wheels in {a.folder}", file=sys.stderr)
        return 1
    carried = {}
    metas = []
    for w in wheels:
        name, version, reqs = wheel_meta(w)
        if name in carried:
            print(f"note: {name} carried twice ({carried[name]} and {version}); install one per target")
        carried.setdefault(name, version)
        metas.append((w.name, name, version, reqs))
    image = image_packages(a.kinds_md)
    bad = 0
    for fname, name, version, reqs in metas:
        for r in reqs:
            if r.marker is not None and not r.marker.evaluate(GPU_ENV):
                continue  # an extra, or not for Python 3.12 on Linux
            dep = canon(r.name)
            if dep in carried:
                ok = Version(carried[dep]) in r.specifier or not str(r.specifier)
                where = f"carried {carried[dep]}"
                if dep in image:
                    where += " (the image has one too)"
            elif dep in image:
                known = IMAGE_VERSIONS.get(dep)
                if known:
                    ok = Version(known) in r.specifier
                    where = f"image {known}"
                else:
                    ok = True
                    where = "image (version unknown here" + (f"; needs {r.specifier})" if str(r.specifier) else ")")
            else:
                ok, where = False, "MISSING"
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {fname}: {r.name}{r.specifier} -> {where}")
    print(f"check_deps.py: {len(wheels)} wheels, {'all needs met' if not bad else f'{bad} unmet'}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
