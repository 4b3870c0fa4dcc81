"""The embedded actor runtime: real actor processes that checkpoint, pause and wake on the first request.

This is the ``local`` backend. It speaks the same protocols as an Agent
Substrate cluster — the ``Control`` gRPC service of ``protos/ateapi.proto``,
an HTTP router addressed by the ``ate-target-actor`` header, glutton routes
with protobuf bodies, and Prometheus metrics under the upstream names — so the
driver and the telemetry harvest work unchanged against either.

Names are imported lazily: actor host processes import only the services they
serve (glutton, sweperf's trajectory service), which keeps a host's start (and
the warm pool's refill) short.
"""

from typing import Any

__all__ = ["EmbeddedRuntime", "RuntimeConfig", "TemplateConfig"]


def __getattr__(name: str) -> Any:
    if name == "EmbeddedRuntime":
        from substrate_assets.runtime.server import EmbeddedRuntime

        return EmbeddedRuntime
    if name in ("RuntimeConfig", "TemplateConfig"):
        from substrate_assets.runtime import config

        return getattr(config, name)
    raise AttributeError(name)
