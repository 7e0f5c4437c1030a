#!/usr/bin/python3
"""An independent safetensors reader/writer for the tests, written from the format's
specification with numpy only (no headlab code, no safetensors package).

  read_safetensors.py read FILE    prints {"metadata": {...}, "tensors": [{"name", "shape",
                                   "values"}...]} as JSON, tensors in data order; the values are
                                   the float32 numbers as Python floats (exact).
  read_safetensors.py write FILE   writes a file with tensors "b" [2, 3] = arange(6) * 0.5 - 1,
                                   "a" [4] = 1 / (1 + arange(4)), "s" [] = 3.25 and metadata
                                   {"who": "numpy"}; the header lists "a" first although its data
                                   comes second, and has no padding.
"""
import json
import struct
import sys

import numpy as np


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    tensors = []
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        assert info["dtype"] == "F32", info
        begin, end = info["data_offsets"]
        arr = np.frombuffer(data[begin:end], dtype="<f4").reshape(info["shape"])
        tensors.append({"name": name, "shape": list(arr.shape),
                        "values": [float(v) for v in arr.ravel()]})
    print(json.dumps({"metadata": meta, "tensors": tensors}))


def write(path):
    b = (np.arange(6, dtype="<f4") * 0.5 - 1).reshape(2, 3)
    a = (1 / (1 + np.arange(4))).astype("<f4")
    s = np.array(3.25, dtype="<f4")
    blobs = [("b", b), ("a", a), ("s", s)]
    entries, offset = {}, 0
    for name, arr in blobs:
        entries[name] = {"dtype": "F32", "shape": list(arr.shape),
                         "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    header = {"__metadata__": {"who": "numpy"}, "a": entries["a"], "b": entries["b"],
              "s": entries["s"]}
    text = json.dumps(header).encode("utf-8")
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for _, arr in blobs:
            f.write(arr.tobytes())


if __name__ == "__main__":
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2])
