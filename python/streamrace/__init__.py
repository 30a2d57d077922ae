"""streamrace from pip: the native tools, installed inside this package.

`pip install .` (scikit-build-core, pyproject.toml at the repository root) builds the CMake
project and installs what `cmake --install` installs into this package's directory:
bin/streamrace, lib/libstreamrace.so (and precise mode's device callbacks when built) and
share/doc/streamrace/. The `streamrace` console command and `python -m streamrace` both
replace the Python process with bin/streamrace, so its arguments, output, exit status and
signals are the binary's own; `streamrace run` then finds lib/ next to bin/ as in any install.
"""
import os
import sys
from pathlib import Path

__all__ = ["binary", "main"]


def binary() -> str:
    """The path of the installed native streamrace binary."""
    return str(Path(__file__).resolve().parent / "bin" / "streamrace")


def main(argv=None) -> int:
    """Runs bin/streamrace with `argv` (default: this process's arguments); returns only on failure."""
    args = sys.argv[1:] if argv is None else list(argv)
    exe = binary()
    if not os.access(exe, os.X_OK):
        sys.stderr.write(f"streamrace: the native binary {exe} is missing; reinstall the package (pip install .)\n")
        return 2
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(exe, ["streamrace", *args])
    return 2  # not reached: execv raises OSError on failure
