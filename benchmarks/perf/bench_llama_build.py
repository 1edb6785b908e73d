"""llama.cpp's build from source, as llama-cpp-python makes it and as ``.ci/install`` does, timed in one run.

Where PyPI has no binary wheel of ``llama-cpp-python`` for the platform, ``bash
.ci/install`` compiles llama.cpp from the source archive, the bulk of a fresh install.
bcas decodes text only; the multimodal library (``libmtmd``: CLIP and the projector code,
``LLAVA_BUILD`` in llama-cpp-python's CMake) is only loaded by llama-cpp-python's image
chat handlers, so ``.ci/install`` builds without it (``CMAKE_ARGS=-DLLAVA_BUILD=OFF``),
and without llama.cpp's common library, which llama-cpp-python forces on and which only
llama.cpp's own tools use (``.ci/llama-cpp-text-only.cmake``).  This script builds a
wheel of the same source archive three ways (llama-cpp-python's default, without
libmtmd, and what ``.ci/install`` builds), one after the other, without a pip cache, and
prints each build's wall time, compile steps (ninja's ``[k/N]`` count) and wheel size,
and the ratio of ``.ci/install``'s time to the default's.  The load average is printed before and
after each build: a figure taken beside other heavy jobs is not the quiet figure.

    python benchmarks/perf/bench_llama_build.py [--sdist llama_cpp_python-0.3.36.tar.gz] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from bench_harness_efficiency import figure, load_text  # noqa: E402

TEXT_ONLY = HERE.parents[1] / ".ci" / "llama-cpp-text-only.cmake"
VARIANTS = {
    "llama-cpp-python's default": "",
    "without libmtmd": "-DLLAVA_BUILD=OFF",
    "without libmtmd and common (.ci/install)": f"-DLLAVA_BUILD=OFF -DCMAKE_PROJECT_INCLUDE_BEFORE={TEXT_ONLY}",
}
STEP = re.compile(rb"\[(\d+)/(\d+)\]")


def source_archive(work: Path, version: str) -> Path:
    """The source archive pip would build (downloaded, not built)."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q", "-d", str(work)]
    subprocess.run([*cmd, f"llama-cpp-python=={version}"], check=True)
    (found,) = work.glob("llama_cpp_python-*.tar.gz")
    return found


def build(sdist: Path, cmake_args: str, out: Path, log: Path) -> tuple[float, int, int]:
    """One wheel build: (seconds, compile steps, wheel bytes)."""
    env = {**os.environ, "PIP_NO_CACHE_DIR": "1", "CMAKE_ARGS": cmake_args}
    out.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(out), str(sdist)]
    t0 = time.perf_counter()
    with log.open("wb") as fh:
        rc = subprocess.run(cmd, env=env, stdout=fh, stderr=subprocess.STDOUT).returncode
    seconds = time.perf_counter() - t0
    if rc != 0:
        raise SystemExit(f"the build failed (exit {rc}); see {log}")
    steps = [int(total) for _, total in STEP.findall(log.read_bytes())]
    (wheel,) = out.glob("*.whl")
    return seconds, max(steps, default=0), wheel.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sdist", default=None, help="a llama-cpp-python source archive (default: download it)")
    parser.add_argument("--version", default="0.3.36", help="the version to download without --sdist")
    parser.add_argument("--keep", default=None, help="work in this folder and keep it (default: a temporary one)")
    args = parser.parse_args(argv)
    work = Path(args.keep) if args.keep else Path(tempfile.mkdtemp(prefix="bcas-llama-build-"))
    work.mkdir(parents=True, exist_ok=True)
    sdist = Path(args.sdist) if args.sdist else source_archive(work, args.version)
    print(f"bench_llama_build: {os.cpu_count()} cores, {sdist.name}, work folder {work}")
    times = {}
    try:
        for i, (name, cmake_args) in enumerate(VARIANTS.items()):
            before = load_text()
            seconds, steps, size = build(sdist, cmake_args, work / f"wheel-{i}", work / f"build-{i}.log")
            times[name] = seconds
            print(
                f"  {name:<42} {seconds:7.1f} s  {steps:4d} compile steps  wheel {size / 1e6:5.1f} MB  "
                f"load {before} -> {load_text()}"
            )
            figure(f"llama.cpp build, {name}", round(seconds, 1), "s")
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    full, light = times["llama-cpp-python's default"], times["without libmtmd and common (.ci/install)"]
    figure("llama.cpp build time, .ci/install's / the default's", round(light / full, 3), "ratio", "< 1", light < full)
    return 0


if __name__ == "__main__":
    sys.exit(main())
