"""A checkpoint as an attacker writes it: code in its pickle, its unkeyed sha256
recomputed from the documented layout, so only the reader's refusal to run code stops it."""

import hashlib
import json
import struct


class Payload:
    """What an attacker pickles: unpickling it runs ``touch marker``."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        import os

        return os.system, (f"touch {self.marker}",)


def forged(path, payload: bytes, tensors: dict | None = None) -> None:
    """``path`` (format 2) with its pickle replaced by ``payload`` (and its shard list by
    ``tensors``, when given) and its sha256 recomputed from the documented layout, identity and
    shard list copied: what anyone can write."""
    from rspo_gym.training.checkpoints import MAGIC  # torch: imported by the tests that forge

    data = path.read_bytes()
    (length,) = struct.unpack(">Q", data[-8:])
    trailer = json.loads(data[-8 - length:-8])
    canonical = lambda value: json.dumps(value, sort_keys=True, separators=(",", ":")).encode()  # noqa: E731
    trailer["payload_bytes"] = len(payload)
    trailer["tensors"] = tensors if tensors is not None else trailer["tensors"]
    trailer["sha256"] = hashlib.sha256(payload + canonical(trailer["identity"]) + canonical(trailer["tensors"])).hexdigest()
    text = json.dumps(trailer).encode()
    path.write_bytes(MAGIC + payload + text + struct.pack(">Q", len(text)))

