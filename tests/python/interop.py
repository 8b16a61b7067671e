"""The Python half of tests/python_interop.rs, run with the PyPI packages
`safetensors` and `numpy` in a throwaway virtualenv.

argv: EXPECTED_JSON OUT_DIR. EXPECTED_JSON describes the files grad wrote
(name, dtype, shape and the bits of every element); this script checks
them exactly with safetensors' own reader, then writes one file per dtype
for grad to load: the same names and shapes, values
(index % 17 - 8) / 8 in row-major order, and metadata {"writer": "python"}.
"""

import json
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

BITS = {"float32": np.uint32, "float64": np.uint64}


def check(case, spec):
    path = spec["file"]
    tensors = load_file(path)
    assert sorted(tensors) == sorted(spec["tensors"]), (sorted(tensors), sorted(spec["tensors"]))
    for name, want in spec["tensors"].items():
        got = tensors[name]
        assert str(got.dtype) == want["dtype"], (name, got.dtype, want["dtype"])
        assert list(got.shape) == want["shape"], (name, got.shape, want["shape"])
        bits = np.ascontiguousarray(got).view(BITS[want["dtype"]]).ravel().tolist()
        assert bits == want["bits"], (name, bits[:4], want["bits"][:4])
    with safe_open(path, framework="np") as f:
        assert f.metadata() == spec["metadata"], (f.metadata(), spec["metadata"])
    elements = sum(int(np.prod(t["shape"])) for t in spec["tensors"].values())
    print(f"python read grad's {case} file: {len(tensors)} tensors, {elements} elements, "
          f"names, shapes, dtypes, values and metadata exact")


def write(case, spec, out_dir):
    out = {}
    for name, want in spec["tensors"].items():
        n = int(np.prod(want["shape"]))
        values = ((np.arange(n) % 17) - 8) / 8
        out[name] = values.astype(want["dtype"]).reshape(want["shape"])
    path = f"{out_dir}/from_python_{case}.safetensors"
    save_file(out, path, metadata={"writer": "python"})
    print(f"python wrote {path}: {len(out)} tensors for grad to load")


def main():
    expected = json.load(open(sys.argv[1]))
    print(f"python {sys.version.split()[0]}, safetensors {safetensors.__version__}, numpy {np.__version__}")
    for case, spec in expected.items():
        check(case, spec)
        write(case, spec, sys.argv[2])


main()
