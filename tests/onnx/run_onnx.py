"""tests/onnx/run_onnx.py — the ONNX export tests' runtime: loads an exported model in ONNX
Runtime and runs it on inputs the test wrote as .npy files, writing the outputs as .npy.

    python run_onnx.py model.onnx IN.npy[,IN2.npy...]=OUT.npy[,OUT2.npy...] ...

Each argument after the model is one run: the model's inputs in order, '=', where its outputs
go. Read next: tests/onnx/onnx_runtime.h (the C++ side).
"""
import sys

import numpy as np
import onnxruntime as ort


def main():
    options = ort.SessionOptions()
    # The export is compared with Kiln's own arithmetic: no rewriting of the graph (fusions
    # change rounding) and one thread (sums in one order).
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(sys.argv[1], options, providers=["CPUExecutionProvider"])
    names = [i.name for i in session.get_inputs()]
    for run in sys.argv[2:]:
        inputs, outputs = run.split("=")
        feeds = {name: np.load(path) for name, path in zip(names, inputs.split(","))}
        for path, value in zip(outputs.split(","), session.run(None, feeds)):
            np.save(path, value)


if __name__ == "__main__":
    main()
