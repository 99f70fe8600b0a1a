"""The PEP 517 build backend of the Python package (pyproject.toml): runs the
repository's CMake build of the module (target neardup_python, libraries
with -fPIC, no tests or benchmarks) for the interpreter pip runs, and packs
<build>/python/neardup into a wheel. Standard library only, so pip needs
no index.

The build directory is <repository>/build-python (NEARDUP_PY_BUILD_DIR
overrides it); JOBS limits the parallel compile jobs, as for
scripts/build.sh."""

import base64
import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import sys
import sysconfig
import zipfile

ROOT = pathlib.Path(__file__).resolve().parents[2]
NAME = "neardup"


def _version():
    # The one version of the tree: CMakeLists.txt's project().
    text = (ROOT / "CMakeLists.txt").read_text(encoding="utf-8")
    return re.search(r"project\(neardup VERSION ([0-9.]+)", text).group(1)


def _tag():
    py = f"cp{sys.version_info.major}{sys.version_info.minor}"
    platform = sysconfig.get_platform().replace("-", "_").replace(".", "_")
    return f"{py}-{py}-{platform}"


def _metadata():
    return (f"Metadata-Version: 2.1\nName: {NAME}\nVersion: {_version()}\n"
            "Summary: near-duplicate text detection (simhash + n-gram Jaccard), in process\n"
            "Requires-Dist: numpy\n")


def _build_module():
    if not (ROOT / "CMakeLists.txt").is_file():
        raise RuntimeError(f"{ROOT} is not the neardup repository: build from a checkout (pip install ./python)")
    build = pathlib.Path(os.environ.get("NEARDUP_PY_BUILD_DIR", ROOT / "build-python"))
    configure = ["cmake", "-S", str(ROOT), "-B", str(build), "-DCMAKE_BUILD_TYPE=Release",
                 "-DNEARDUP_BUILD_TESTS=OFF", "-DNEARDUP_BUILD_BENCHMARKS=OFF", "-DNEARDUP_PYTHON=ON",
                 f"-DPython_EXECUTABLE={sys.executable}"]
    if shutil.which("ninja") and not (build / "Makefile").exists():
        configure += ["-G", "Ninja"]
    if shutil.which("ccache"):
        configure.append("-DCMAKE_CXX_COMPILER_LAUNCHER=ccache")
    jobs = os.environ.get("JOBS", str(os.cpu_count() or 1))
    subprocess.run(configure, check=True, stdout=sys.stderr)
    subprocess.run(["cmake", "--build", str(build), "--target", "neardup_python", "-j", jobs],
                   check=True, stdout=sys.stderr)
    return build / "python" / NAME


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_dist_info(directory):
    info = pathlib.Path(directory) / f"{NAME}-{_version()}.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text(_metadata(), encoding="utf-8")
    return info.name


def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    return _write_dist_info(metadata_directory)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    package = _build_module()
    info = f"{NAME}-{_version()}.dist-info"
    files = {f"{NAME}/{p.name}": p.read_bytes() for p in sorted(package.iterdir()) if p.is_file()}
    files[f"{info}/METADATA"] = _metadata().encode()
    files[f"{info}/WHEEL"] = (f"Wheel-Version: 1.0\nGenerator: neardup_build\nRoot-Is-Purelib: false\n"
                              f"Tag: {_tag()}\n").encode()
    record = [_record_line(name, data) for name, data in files.items()] + [f"{info}/RECORD,,"]
    files[f"{info}/RECORD"] = ("\n".join(record) + "\n").encode()
    wheel = f"{NAME}-{_version()}-{_tag()}.whl"
    with zipfile.ZipFile(pathlib.Path(wheel_directory) / wheel, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in files.items():
            z.writestr(name, data)
    return wheel
