"""The generated ``apache.rocketmq.v2`` modules of the official client, loaded in isolation.

Importing ``rocketmq`` runs its ``__init__``, which configures logging (a rotating file under
the home directory) and OpenTelemetry. The generated modules need none of that, so while they are
imported the two package levels stand in as plain namespace modules pointing at the installed
files. The stand-ins are removed afterwards: a later ``import rocketmq`` in the same process gets
the real client, which finds the generated modules already loaded.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from typing import Any


class ProtocolUnavailable(ImportError):
    """The ``rocketmq-python-client`` package (extra ``halfmq[rocketmq]``) is not installed."""


@functools.cache
def load() -> tuple[Any, Any, Any]:
    """Return ``(definition_pb2, service_pb2, service_pb2_grpc)``; raise ProtocolUnavailable."""
    spec = importlib.util.find_spec("rocketmq")
    if spec is None or not spec.submodule_search_locations:
        raise ProtocolUnavailable("install halfmq[rocketmq] (rocketmq-python-client) for the RocketMQ 5 front end")
    root = next(iter(spec.submodule_search_locations))
    stand_ins = []
    for name, path in (("rocketmq", root), ("rocketmq.grpc_protocol", f"{root}/grpc_protocol")):
        if name not in sys.modules:
            module = types.ModuleType(name)
            module.__path__ = [path]
            sys.modules[name] = module
            stand_ins.append(name)
    names = [f"rocketmq.grpc_protocol.{m}" for m in ("definition_pb2", "service_pb2", "service_pb2_grpc")]
    try:
        return tuple(importlib.import_module(name) for name in names)  # type: ignore[return-value]
    finally:
        if stand_ins:  # loaded under the stand-ins: the real package will load its own
            for name in (*stand_ins, *names):
                sys.modules.pop(name, None)
