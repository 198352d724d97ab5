#!/usr/bin/env python3
"""The GPU machine's side of the bundle (scripts/gpu-bundle.sh): finds the
libraries that do not travel (NCCL, cuBLAS, the CUDA runtime: the GPU image's
pip packages nvidia-nccl-cu13, nvidia-cublas, nvidia-cuda-runtime, else a CUDA
toolkit or the loader's cache) and checks what the bundle needs of the machine.

  gpu_env.py BUNDLE --ld-path     prints the LD_LIBRARY_PATH the launcher sets
  gpu_env.py BUNDLE --preflight   GPU, driver, CUDA runtime, NCCL runtime vs the
                                  header version built with, cuBLAS, the glibc and
                                  libstdc++ the bundle needs (manifest "needs"); prints one
                                  line per check and a JSON line last; exit 0
                                  all present, 2 no GPU (the rest checked), 1
                                  something else missing or mismatched

The NCCL check fails when the runtime is older than the headers, and only
notes a newer minor version (the LSA path is then off: the host path runs). BUNDLE/manifest.json names the libraries expected from the image (from_image)
and the NCCL header version built with (nccl_header_version)."""
import ctypes
import glob
import json
import os
import pathlib
import re
import shutil
import site
import subprocess
import sys

# Where a CUDA toolkit keeps its libraries, after the pip packages.
TOOLKIT_DIRS = ["/usr/local/cuda/lib64", "/usr/local/cuda/targets/x86_64-linux/lib"]


def site_dirs():
    dirs = []
    try:
        dirs += site.getsitepackages()
    except AttributeError:
        pass
    dirs += [p for p in sys.path if p.endswith("-packages")]
    return [d for d in dict.fromkeys(dirs) if os.path.isdir(d)]


def candidates(soname):
    """Directories holding `soname`, best first."""
    found = []
    for d in os.environ.get("COCONET_CUDA_LIB_DIRS", "").split(":"):
        if d and os.path.exists(os.path.join(d, soname)):
            found.append(d)
    for sp in site_dirs():  # nvidia/nccl/lib, nvidia/cu13/lib, nvidia/cublas/lib, ...
        for path in sorted(glob.glob(os.path.join(sp, "nvidia", "*", "lib", soname))):
            found.append(os.path.dirname(path))
    for d in TOOLKIT_DIRS:
        if os.path.exists(os.path.join(d, soname)):
            found.append(d)
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        for line in cache.splitlines():
            if line.strip().startswith(soname + " ") and "=>" in line:
                found.append(os.path.dirname(line.split("=>")[1].strip()))
    except (OSError, subprocess.SubprocessError):
        pass
    return list(dict.fromkeys(found))


def manifest(bundle):
    return json.loads((pathlib.Path(bundle) / "manifest.json").read_text())


def locate(m):
    return {so: (candidates(so) or [None])[0] for so in m["from_image"]}


def ld_path(bundle, m):
    dirs = [str(pathlib.Path(bundle).resolve() / "lib")]
    dirs += [d for d in locate(m).values() if d]
    old = os.environ.get("LD_LIBRARY_PATH", "")
    return ":".join(list(dict.fromkeys(dirs)) + ([old] if old else []))


def version_text(code):
    """NCCL_VERSION_CODE (2.9+: major*10000 + minor*100 + patch) as text."""
    return f"{code // 10000}.{code // 100 % 100}.{code % 100}"


def call_int(lib, fn, *args):
    value = ctypes.c_int(0)
    rc = getattr(lib, fn)(*args, ctypes.byref(value))
    return rc, value.value


def version_tuple(text):
    return tuple(int(x) for x in text.split(".") if x.isdigit())


def glibc_here():
    """This machine's glibc version ("2.39"), or None."""
    try:
        return os.confstr("CS_GNU_LIBC_VERSION").split()[-1]
    except (ValueError, OSError, AttributeError, IndexError):
        return None


def glibcxx_here():
    """The newest GLIBCXX symbol version of the libstdc++.so.6 the loader finds, or None."""
    paths = []
    try:
        cache = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=10).stdout
        paths = [l.split("=>")[1].strip() for l in cache.splitlines()
                 if l.strip().startswith("libstdc++.so.6 ") and "=>" in l]
    except (OSError, subprocess.SubprocessError):
        pass
    paths += glob.glob("/usr/lib/x86_64-linux-gnu/libstdc++.so.6") + glob.glob("/usr/lib64/libstdc++.so.6")
    for path in paths:
        try:
            data = pathlib.Path(path).read_bytes()
        except OSError:
            continue
        found = re.findall(rb"GLIBCXX_(3\.4(?:\.[0-9]+)?)\x00", data)
        if found:
            return max((f.decode() for f in found), key=version_tuple)
    return None


def runtime_checks(m):
    """The C and C++ runtimes against the oldest the bundle needs (gpu-bundle.sh)."""
    needs = m.get("needs", {})
    checks = []
    for name, want, have in (("glibc", needs.get("glibc"), glibc_here()),
                             ("libstdc++", needs.get("glibcxx"), glibcxx_here())):
        if not want:
            checks.append((name, False, "the manifest does not say which version the bundle needs: pack it again"))
        elif have is None:
            checks.append((name, False, f"cannot tell this machine's version (the bundle needs {want})"))
        else:
            ok = version_tuple(have) >= version_tuple(want)
            checks.append((name, ok, f"{have} here, the bundle needs {want}" +
                           ("" if ok else ": build the bundle on an older system")))
    return checks


def preflight(bundle, m):
    checks = []  # (name, ok, detail)
    libs = locate(m)

    def load(so):
        d = libs.get(so)
        try:
            return ctypes.CDLL(os.path.join(d, so) if d else so)
        except OSError as e:
            return str(e)

    smi = shutil.which("nvidia-smi")
    gpus = ""
    if smi:
        r = subprocess.run([smi, "--query-gpu=name,memory.total,driver_version", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        gpus = r.stdout.strip() if r.returncode == 0 else ""
    checks.append(("gpu", bool(gpus), gpus or "no GPU: nvidia-smi " + ("lists none" if smi else "not found")))
    checks += runtime_checks(m)

    cudart = load("libcudart.so.13") if "libcudart.so.13" in libs else None
    if isinstance(cudart, str):
        checks.append(("cuda_runtime", False, "libcudart.so.13 not found: install nvidia-cuda-runtime (" + cudart + ")"))
    elif cudart is not None:
        rc, rt = call_int(cudart, "cudaRuntimeGetVersion")
        _, drv = call_int(cudart, "cudaDriverGetVersion")
        checks.append(("cuda_runtime", rc == 0, f"runtime {rt // 1000}.{rt % 1000 // 10} at {libs['libcudart.so.13']}"))
        checks.append(("driver", drv >= rt and drv > 0,
                       f"driver supports CUDA {drv // 1000}.{drv % 1000 // 10}" if drv else "no CUDA driver"))
        rc, count = call_int(cudart, "cudaGetDeviceCount")
        checks.append(("cuda_devices", rc == 0 and count > 0, f"{count} device(s)" if rc == 0 else f"cudaGetDeviceCount error {rc}"))

    nccl = load("libnccl.so.2")
    header = m["nccl_header_version"]
    if isinstance(nccl, str):
        checks.append(("nccl", False, "libnccl.so.2 not found: install nvidia-nccl-cu13 (" + nccl + ")"))
    else:
        _, code = call_int(nccl, "ncclGetVersion")
        run = version_text(code)
        run_v = tuple(int(x) for x in run.split("."))
        header_v = tuple(int(x) for x in header.split("."))
        # Older than the headers: symbols the programs call may be missing
        # (stop). Another minor version: the host API is compatible, the
        # device-API (LSA) structs may not be (go on, say so).
        checks.append(("nccl", run_v >= header_v,
                       f"runtime {run}, headers {header} at {libs['libnccl.so.2']}" +
                       ("" if run_v[:2] == header_v[:2] else
                        ": older than the headers" if run_v < header_v else
                        ": another minor version: the LSA path is off (host path), its tests skip")))

    for so in [s for s in m["from_image"] if s.startswith("libcublas")]:
        lib = load(so)
        checks.append((so.split(".")[0], not isinstance(lib, str),
                       f"at {libs[so]}" if not isinstance(lib, str) else f"{so} not found: install nvidia-cublas ({lib})"))

    for name, ok, detail in checks:
        print(f"preflight: {name:13s} {'ok     ' if ok else 'MISSING'} {detail}")
    no_gpu = not checks[0][1]
    others_ok = all(ok for name, ok, _ in checks if name not in ("gpu", "cuda_devices", "driver"))
    status = "ok" if all(ok for _, ok, _ in checks) else ("no_gpu" if no_gpu and others_ok else "missing")
    print(json.dumps({"status": status, "checks": {n: {"ok": ok, "detail": d} for n, ok, d in checks}}))
    return 0 if status == "ok" else 2 if status == "no_gpu" else 1


def main():
    if len(sys.argv) != 3 or sys.argv[2] not in ("--ld-path", "--preflight"):
        print(__doc__, file=sys.stderr)
        return 64
    bundle, what = sys.argv[1], sys.argv[2]
    m = manifest(bundle)
    if what == "--ld-path":
        print(ld_path(bundle, m))
        return 0
    return preflight(bundle, m)


if __name__ == "__main__":
    sys.exit(main())
