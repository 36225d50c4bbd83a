"""A fake-quantized copy of a real GGUF: chosen tensors rotated, quantized, rotated back, stored F32.

Every other tensor is copied byte for byte in its own type, and every metadata field is copied
(gguf's GGUFReader in, GGUFWriter out), so llama-perplexity on the copy differs from the source
only in the chosen tensors. The native arm and the gauge arm are two such copies of one source.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Optional

import numpy as np
from gguf import GGMLQuantizationType, GGUFReader, GGUFValueType, GGUFWriter


def _copy_field(writer: GGUFWriter, field) -> None:
    vtype = field.types[0]
    if vtype == GGUFValueType.ARRAY:
        sub = field.types[-1]
        if sub == GGUFValueType.STRING:
            value = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
        else:
            value = [field.parts[i].tolist()[0] for i in field.data]
        writer.add_key_value(field.name, value, vtype, sub_type=sub)
    elif vtype == GGUFValueType.STRING:
        writer.add_key_value(field.name, bytes(field.parts[field.data[0]]).decode("utf-8", "surrogateescape"), vtype)
    else:
        writer.add_key_value(field.name, field.parts[field.data[0]].tolist()[0], vtype)


def write_fake_quantized(src: Path, dst: Path, replace: dict[str, Callable[[np.ndarray], np.ndarray]],
                         dequant: Callable[[str], np.ndarray],
                         reader: Optional[GGUFReader] = None) -> dict[str, np.ndarray]:
    """Copy `src` to `dst`, storing replace[name](W) as F32 for each named tensor.

    ``dequant(name)`` gives a tensor's float32 weights (rows, cols); returns what was written.
    ``reader``: ``src`` already opened (GGUFReader decodes every metadata field, a real model's
    whole tokenizer: seconds), when the caller writes two copies of one source.
    """
    reader = reader or GGUFReader(src)
    arch = str(bytes(reader.fields["general.architecture"].parts[-1]), "utf-8")
    writer = GGUFWriter(str(dst), arch)
    for name, field in reader.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture":
            continue  # written by GGUFWriter itself
        _copy_field(writer, field)
    written: dict[str, np.ndarray] = {}
    missing = set(replace) - {t.name for t in reader.tensors}
    if missing:
        raise KeyError(f"{src}: no tensor {sorted(missing)[0]!r}")
    for t in reader.tensors:
        if t.name in replace:
            w = np.ascontiguousarray(replace[t.name](dequant(t.name)), dtype=np.float32)
            written[t.name] = w
            writer.add_tensor(t.name, w, raw_dtype=GGMLQuantizationType.F32)
        else:
            shape = [int(x) for x in reversed(t.shape)]  # numpy order for raw_shape
            writer.add_tensor(t.name, t.data, raw_shape=shape if t.tensor_type in (0, 1) else None,
                              raw_dtype=t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return written
