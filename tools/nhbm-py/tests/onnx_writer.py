# SPDX-License-Identifier: MIT OR Apache-2.0
"""A tiny ONNX writer for the tests: just enough of the protobuf wire format
(varints and length-delimited fields) to write a model of MatMul, Relu and
Add nodes with float32 initializers, without the onnx package. The bytes
depend only on the arguments, so every run writes the same file."""

import struct
from typing import List, Optional, Sequence

FLOAT = 1  # TensorProto.DataType.FLOAT


def _varint(v: int) -> bytes:
    if v < 0:
        v += 1 << 64
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _int(field: int, v: int) -> bytes:
    return _varint(field << 3) + _varint(v)


def _bytes(field: int, b: bytes) -> bytes:
    return _varint((field << 3) | 2) + _varint(len(b)) + b


def _str(field: int, s: str) -> bytes:
    return _bytes(field, s.encode())


def _weights(name: str, n: int) -> bytes:
    """n small deterministic float32 values, seeded by the name."""
    x = 0xCBF29CE484222325
    for c in name.encode():
        x = ((x ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    x |= 1
    vals = []
    for _ in range(n):
        x ^= (x << 13) & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 7
        x ^= (x << 17) & 0xFFFFFFFFFFFFFFFF
        vals.append(((x >> 40) / float(1 << 24) - 0.5) * 0.2)
    return struct.pack(f"<{n}f", *vals)


def _initializer(name: str, dims: Sequence[int]) -> bytes:
    n = 1
    for d in dims:
        n *= d
    body = b"".join(_int(1, d) for d in dims)  # dims
    body += _int(2, FLOAT)  # data_type
    body += _str(8, name)  # name
    body += _bytes(9, _weights(name, n))  # raw_data
    return body


def _value_info(name: str, dims: Sequence[Optional[int]]) -> bytes:
    shape = b""
    for d in dims:
        dim = _int(1, d) if d is not None else _str(2, "batch")
        shape += _bytes(1, dim)
    tensor = _int(1, FLOAT) + _bytes(2, shape)  # elem_type, shape
    return _str(1, name) + _bytes(2, _bytes(1, tensor))  # name, type.tensor_type


def _node(op: str, inputs: List[str], outputs: List[str]) -> bytes:
    body = b"".join(_str(1, i) for i in inputs)
    body += b"".join(_str(2, o) for o in outputs)
    body += _str(3, outputs[0]) + _str(4, op)
    return body


def mlp(batch: Optional[int], width: int = 16, hidden: int = 32, out: int = 8) -> bytes:
    """A two-layer perceptron: x [batch, width] -> MatMul w1 -> Relu ->
    MatMul w2 -> Add b2 -> y [batch, out]. `batch` None leaves the batch
    dimension symbolic ("batch")."""
    nodes = [
        _node("MatMul", ["x", "w1"], ["h"]),
        _node("Relu", ["h"], ["r"]),
        _node("MatMul", ["r", "w2"], ["m"]),
        _node("Add", ["m", "b2"], ["y"]),
    ]
    graph = b"".join(_bytes(1, n) for n in nodes)
    graph += _str(2, "mlp")
    graph += _bytes(5, _initializer("w1", [width, hidden]))
    graph += _bytes(5, _initializer("w2", [hidden, out]))
    graph += _bytes(5, _initializer("b2", [out]))
    graph += _bytes(11, _value_info("x", [batch, width]))
    graph += _bytes(12, _value_info("y", [batch, out]))
    opset = _str(1, "") + _int(2, 13)
    return _int(1, 8) + _str(2, "nhbm-tests") + _bytes(7, graph) + _bytes(8, opset)
