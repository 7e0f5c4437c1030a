#!/usr/bin/env python3
"""Writes the small safetensors files of this directory (run it here after changing it).

valid.safetensors is a correct file in the standard layout (8-byte little-endian header length,
JSON header padded with spaces to a multiple of 8, raw little-endian fp32 data); every other
file breaks one rule. They seed the safetensors fuzzer (fuzz/) and some cases of
../checkpoint/cases.txt copy them over a checkpoint's model.safetensors.
"""
import json
import struct


def layout(header, data, pad=True):
    text = header if isinstance(header, bytes) else json.dumps(header, separators=(',', ':')).encode()
    if pad:
        text += b' ' * (-len(text) % 8)
    return struct.pack('<Q', len(text)) + text + data


def f32(*values):
    return struct.pack('<%df' % len(values), *values)


W = {'dtype': 'F32', 'shape': [2, 2], 'data_offsets': [0, 16]}
B = {'dtype': 'F32', 'shape': [2], 'data_offsets': [16, 24]}
DATA = f32(1.0, 2.0, 3.0, 4.0) + f32(0.5, -0.5)
META = {'step': '3'}

files = {
    'valid': layout({'__metadata__': META, 'w': W, 'b': B}, DATA),
    'valid_empty_tensor': layout({'e': {'dtype': 'F32', 'shape': [0, 3], 'data_offsets': [0, 0]}}, b''),
    'too_short': b'\x10\x00\x00',
    'length_beyond_file': struct.pack('<Q', 1 << 40) + b'{}',
    'length_zero': struct.pack('<Q', 0) + DATA,
    'header_not_object': layout(b'[1,2,3]', b''),
    'header_bad_json': layout(b'{"w": {"dtype": "F32", ', DATA),
    'header_deep': layout(b'{"w":' + b'[' * 200 + b']' * 200 + b'}', b''),
    'dtype_f16': layout({'w': dict(W, dtype='F16'), 'b': B}, DATA),
    'dtype_bf16': layout({'w': dict(W, dtype='BF16'), 'b': B}, DATA),
    'shape_mismatch': layout({'w': dict(W, shape=[3, 2]), 'b': B}, DATA),
    'shape_negative': layout({'w': dict(W, shape=[-2, -2]), 'b': B}, DATA),
    'shape_overflow': layout({'w': dict(W, shape=[1 << 31, 1 << 31, 1 << 31]), 'b': B}, DATA),
    'offsets_overlap': layout({'w': W, 'b': dict(B, data_offsets=[8, 16])}, DATA),
    'offsets_gap': layout({'w': W, 'b': dict(B, data_offsets=[20, 28])}, DATA + f32(0.0)),
    'offsets_reversed': layout({'w': W, 'b': dict(B, data_offsets=[24, 16])}, DATA),
    'offsets_past_end': layout({'w': W, 'b': dict(B, data_offsets=[16, 32])}, DATA),
    'trailing_bytes': layout({'w': W, 'b': B}, DATA + b'\x00' * 8),
    'truncated_data': layout({'w': W, 'b': B}, DATA[:-4]),
    'duplicate_name': layout(b'{"w":' + json.dumps(W).encode() + b',"w":' + json.dumps(B).encode() + b'}', DATA),
    'metadata_not_string': layout({'__metadata__': {'step': 3}, 'w': W, 'b': B}, DATA),
    'entry_extra_key': layout({'w': dict(W, scale=2), 'b': B}, DATA),
    'name_empty': layout({'': W, 'b': B}, DATA),
}

for name, data in files.items():
    with open(name + '.safetensors', 'wb') as f:
        f.write(data)
