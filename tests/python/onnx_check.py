"""Checks grad's ONNX exports with the real onnx and onnxruntime.

Usage: python onnx_check.py MANIFEST.json

The manifest (written by tests/onnx.rs) lists cases; each names a model
file and runs of it: the inputs grad fed and the outputs grad computed,
at the traced batch size and at others, and the dims its outputs must
declare (a number, or the symbol of a dim that grows with the batch).
For each case: the checker
(`onnx.checker.check_model` with `full_check=True`, which runs ONNX's
shape inference too), then every run in onnxruntime, each output within
1e-5 of grad's (relative to the larger of 1 and grad's magnitude).
Prints one line per run; exits 1 at the first failure.
"""
import json
import sys

import numpy as np
import onnx
import onnxruntime as ort

TOLERANCE = 1e-5


def array(entry):
    return np.asarray(entry["data"], dtype=entry["dtype"]).reshape(entry["shape"])


def main():
    with open(sys.argv[1]) as f:
        manifest = json.load(f)
    for case in manifest["cases"]:
        model = onnx.load(case["model"])
        onnx.checker.check_model(model, full_check=True)
        ops = sorted({node.op_type for node in model.graph.node})
        for output in model.graph.output:
            dims = [d.dim_param or d.dim_value for d in output.type.tensor_type.shape.dim]
            want = case.get("output_dims", {}).get(output.name)
            if want is not None and dims != want:
                print(f"{case['name']}: output {output.name} declared {dims}, expected {want}")
                sys.exit(1)
        session = ort.InferenceSession(case["model"], providers=["CPUExecutionProvider"])
        for run in case["runs"]:
            feeds = {name: array(entry) for name, entry in run["inputs"].items()}
            names = list(run["outputs"])
            got = session.run(names, feeds)
            for name, value in zip(names, got):
                want = array(run["outputs"][name])
                if value.shape != want.shape:
                    print(f"{case['name']}: output {name} has shape {value.shape}, grad's {want.shape}")
                    sys.exit(1)
                error = float(np.max(np.abs(value.astype(np.float64) - want) / np.maximum(1.0, np.abs(want)), initial=0.0))
                shapes = {k: list(v.shape) for k, v in feeds.items()}
                print(f"{case['name']}: inputs {shapes}: {name} {list(want.shape)} max error {error:.2e}")
                if not error <= TOLERANCE:
                    print(f"{case['name']}: {name} differs from grad's by {error:.2e} > {TOLERANCE}")
                    sys.exit(1)
        print(f"{case['name']}: checker passed; ops {' '.join(ops)}")


if __name__ == "__main__":
    main()
