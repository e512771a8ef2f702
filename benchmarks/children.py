"""What benchmarks/run.py runs: the projects' files and the child scripts each measure starts
(a fresh process per sample: the warm JIT load, the floor, the no-op hooks)."""

THEIRS_PYPROJECT = """\
[build-system]
requires = ["setuptools", "torch"]
build-backend = "setuptools.build_meta"

[project]
name = "benchops"
version = "0.1.0"
dynamic = ["dependencies"]
"""
# setup.py owns the metadata here, so our setuptools face can add the torch pin.
OURS_SETUP_PYPROJECT = """\
[build-system]
requires = ["setuptools", "torch", "pep517_torch"]
build-backend = "setuptools.build_meta"
"""
IMPORT_SWITCH = ("from torch.utils.cpp_extension import", "from pep517_torch.setuptools import")
OPS_SOURCE = """\
#include <torch/library.h>
#include <ATen/core/Tensor.h>
at::Tensor twice(const at::Tensor& x) { return x.mul(2); }
TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) { m.def("twice(Tensor x) -> Tensor", twice); }
"""
JIT_SOURCE = """\
#include <torch/extension.h>
torch::Tensor {name}_op(const torch::Tensor& x) {{ return torch::relu(x) * {k} + x.sin(); }}
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {{ m.def("op", &{name}_op); }}
"""
WARM_CHILD = """\
import json, subprocess, sys, time
import torch
calls = 0
original = subprocess.Popen.__init__
def counting(self, *args, **kwargs):
    global calls
    calls += 1
    return original(self, *args, **kwargs)
subprocess.Popen.__init__ = counting
start = time.perf_counter()
if sys.argv[1] == "ours":
    from pep517_torch import load
else:
    from torch.utils.cpp_extension import load
load(sys.argv[2], [sys.argv[3]], build_directory=sys.argv[4], is_python_module=False)
print(json.dumps({"ms": (time.perf_counter() - start) * 1000, "subprocesses": calls}))
"""
C_API_SOURCE = """\
#include <Python.h>
#define STR_(a) #a
#define STR(a) STR_(a)
#define INIT_(a) PyInit_##a
#define INIT(a) INIT_(a)
static PyObject* answer(PyObject*, PyObject*) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, nullptr}, {nullptr, nullptr, 0, nullptr}};
static PyModuleDef definition = {PyModuleDef_HEAD_INIT, STR(TORCH_EXTENSION_NAME), nullptr, -1, methods};
PyMODINIT_FUNC INIT(TORCH_EXTENSION_NAME)() { return PyModule_Create(&definition); }
"""
# Counts every process start; times the load() call alone, or the floor: importlib on the .so.
FLOOR_CHILD = """\
import glob, importlib.util, json, os, sys, time
started = []
events = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.system")
sys.addaudithook(lambda event, args: started.append(event) if event in events else None)
import torch
from pep517_torch import load
who, name, source, build = sys.argv[1:5]
if who == "ours":
    start = time.perf_counter()
    module = load(name, [source], build_directory=build)
else:
    path = glob.glob(os.path.join(build, name + "*.so"))[0]
    start = time.perf_counter()
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
ms = (time.perf_counter() - start) * 1000
assert module.answer() == 42
print(json.dumps({"ms": ms, "subprocesses": len(started)}))
"""
HOOKS_CHILD = """\
import json, sys, time
started = []
events = ("subprocess.Popen", "os.posix_spawn", "os.exec", "os.fork", "os.system")
sys.addaudithook(lambda event, args: started.append(event) if event in events else None)
wall, cpu = time.perf_counter(), time.process_time()
import pep517_torch.buildapi as api
api.prepare_metadata_for_build_wheel(sys.argv[1])
api.build_wheel(sys.argv[2])
print(json.dumps({"s": time.perf_counter() - wall, "cpu": time.process_time() - cpu,
                  "subprocesses": len(started)}))
"""
FLOOR_PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"

[project]
name = "floorops"
version = "1.0"
dynamic = ["dependencies"]

[tool.torch-ext]
packages = []

[[tool.torch-ext.extension]]
name = "floorops"
sources = ["module.cpp"]
"""
JIT_CHILD = """\
import sys, time
import torch
if sys.argv[1] == "ours":
    from pep517_torch import load
else:
    from torch.utils.cpp_extension import load
start = time.perf_counter()
module = load(sys.argv[2], [sys.argv[3]], build_directory=sys.argv[4])
print(time.perf_counter() - start)
"""
CUDA_SETUP_PY = """\
from setuptools import setup
from torch.utils.cpp_extension import BuildExtension, CUDAExtension
setup(name="cudatorchops", version="0.1.0", packages=["cudatorchops"],
      ext_modules=[CUDAExtension("cudatorchops._C", ["csrc/ops.cpp", "csrc/kernels.cu"])],
      cmdclass={"build_ext": BuildExtension})
"""
CUDA_PYPROJECT = """\
[build-system]
requires = ["pep517_torch", "torch"]
build-backend = "pep517_torch"
[project]
name = "cudatorchops"
version = "0.1.0"
dynamic = ["dependencies"]
[tool.torch-ext]
packages = ["cudatorchops"]
[[tool.torch-ext.extension]]
name = "cudatorchops._C"
sources = ["csrc/ops.cpp", "csrc/kernels.cu"]
"""
# pip's own floor for a no-op: the same `pip wheel` with an in-tree backend that copies a wheel.
PIP_FLOOR_PYPROJECT = """\
[build-system]
requires = []
build-backend = "copy_backend"
backend-path = ["."]

[project]
name = "benchops"
version = "0.1.0"
"""
PIP_FLOOR_BACKEND = """\
import os, shutil
KEPT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kept")
def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    (name,) = os.listdir(KEPT)
    shutil.copy(os.path.join(KEPT, name), wheel_directory)
    return name
"""
