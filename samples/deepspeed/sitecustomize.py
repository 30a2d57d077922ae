"""Import-time compatibility shims for running DeepSpeed 0.14.x on NumPy 2 / PyTorch 2.11.

Put this file's directory on PYTHONPATH (samples/deepspeed/debug.sh does) and Python imports
it at start-up.  Nothing in DeepSpeed's own files is changed.  Two names that DeepSpeed 0.14.x
imports no longer exist on the GPU machine's stack:

  * ``numpy.BUFSIZE`` (removed in NumPy 2.0), imported by
    ``deepspeed/autotuning/scheduler.py``;
  * ``torch.distributed.elastic.agent.server.api._get_socket_with_port`` (removed from
    recent PyTorch), imported by ``deepspeed/elasticity/elastic_agent.py``.

Both are only imported, never used, on the training path of the samples.  The shims are
lazy: an import hook adds the attribute right after the owning module has been executed, so
start-up of processes that never import NumPy or PyTorch (the launcher's helpers) stays
cheap, and importing this module never imports torch itself (which would, among other
things, move the point where ``TORCH_CUDA_SANITIZER`` takes effect).

Set ``STREAMRACE_DS_SHIMS=0`` to switch the shims off (to see the original ImportErrors).
If another ``sitecustomize`` exists further down ``sys.path`` (Debian/Ubuntu ship one), it is
executed too, so this file does not hide it.
"""

import importlib.abc
import importlib.machinery
import importlib.util
import os
import socket
import sys

_NUMPY_BUFSIZE = 8192  # the value NumPy 1.x exported (numpy.core.umath.UFUNC_BUFSIZE_DEFAULT)


def _get_socket_with_port():
    """Return a listening TCP socket bound to a free port on localhost.

    Same contract as the helper PyTorch used to have: the caller reads the port with
    ``sock.getsockname()[1]`` and closes the socket when it hands the port on.
    """
    last_error = None
    for family, socktype, proto, _, _ in socket.getaddrinfo(
        "localhost", None, socket.AF_UNSPEC, socket.SOCK_STREAM, 0, socket.AI_PASSIVE
    ):
        sock = socket.socket(family, socktype, proto)
        try:
            sock.bind(("localhost", 0))
            sock.listen(0)
            return sock
        except OSError as err:  # try the next address family (e.g. no IPv6)
            last_error = err
            sock.close()
    raise RuntimeError(f"could not bind a socket on localhost: {last_error}")


def _patch_numpy(module):
    if "BUFSIZE" not in module.__dict__:
        module.BUFSIZE = _NUMPY_BUFSIZE


def _patch_elastic_api(module):
    if "_get_socket_with_port" not in module.__dict__:
        module._get_socket_with_port = _get_socket_with_port


_PATCHES = {
    "numpy": _patch_numpy,
    "torch.distributed.elastic.agent.server.api": _patch_elastic_api,
}


class _PatchingLoader(importlib.abc.Loader):
    """Wraps the real loader; applies the patch once the module body has run."""

    def __init__(self, inner, patch):
        self._inner = inner
        self._patch = patch

    def create_module(self, spec):
        return self._inner.create_module(spec)

    def exec_module(self, module):
        self._inner.exec_module(module)
        self._patch(module)

    def __getattr__(self, name):  # get_resource_reader, get_code, is_package, ...
        return getattr(self._inner, name)


class _PatchingFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        patch = _PATCHES.get(fullname)
        if patch is None:
            return None
        # Ask the remaining finders for the real spec, skipping ourselves.
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _PatchingLoader(spec.loader, patch)
                return spec
        return None


def _install():
    if os.environ.get("STREAMRACE_DS_SHIMS", "1") == "0":
        return
    # Modules already imported (unlikely this early) are patched directly.
    for name, patch in _PATCHES.items():
        if name in sys.modules:
            patch(sys.modules[name])
    sys.meta_path.insert(0, _PatchingFinder())


def _chain_next_sitecustomize():
    """Run the next sitecustomize on sys.path, the one this file shadows, if any."""
    here = os.path.dirname(os.path.abspath(__file__))
    for entry in sys.path:
        try:
            if not entry or os.path.abspath(entry) == here:
                continue
        except (TypeError, ValueError):
            continue
        candidate = os.path.join(entry, "sitecustomize.py")
        if os.path.isfile(candidate):
            spec = importlib.util.spec_from_file_location("_shadowed_sitecustomize", candidate)
            if spec is None or spec.loader is None:
                return
            try:
                spec.loader.exec_module(importlib.util.module_from_spec(spec))
            except Exception as err:  # never break interpreter start-up
                print(f"[streamrace sitecustomize] {candidate}: {err!r}", file=sys.stderr)
            return


_install()
_chain_next_sitecustomize()
