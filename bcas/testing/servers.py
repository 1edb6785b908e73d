"""The loopback servers of :mod:`bcas.testing` in one import: ``FaultServer`` (scripted,
or a fault-injecting proxy in front of a real server) and ``LlamaCppServer`` (a real
llama.cpp server process)."""

from bcas.processes import free_port
from bcas.testing.fault_server import Fault, FaultServer, RecordedRequest, default_reply
from bcas.testing.llama import LlamaCppServer, ServerStartError
from bcas.testing.proxy import FAULT_KINDS, FaultSchedule

__all__ = [
    "FAULT_KINDS",
    "Fault",
    "FaultSchedule",
    "FaultServer",
    "LlamaCppServer",
    "RecordedRequest",
    "ServerStartError",
    "default_reply",
    "free_port",
]
