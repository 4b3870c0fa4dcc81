"""Protobuf and gRPC modules generated from ``protos/*.proto`` when first imported.

No generated code is committed. On first use the ``.proto`` files are compiled
with ``grpc_tools.protoc`` into a cache directory keyed by a digest of their
text and of the compiler and runtime versions, and loaded as the package
``substrate_protos``. Later imports reuse the cache. Generation writes to a
temporary directory and renames it into place, so concurrent first imports
never see half-written modules.

Usage::

    from substrate_assets.protos import ateapi_pb2, ateapi_pb2_grpc, glutton_pb2
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import shutil
import sys
import tempfile
from importlib import metadata
from pathlib import Path
from types import ModuleType

from substrate_assets.cache import cache_directory

PACKAGE = "substrate_protos"


def proto_directory() -> Path:
    """Where the ``.proto`` sources are: inside an installed wheel, else the project's ``protos/``."""
    packaged = Path(__file__).parent / "_protos"
    if packaged.is_dir():
        return packaged
    return Path(__file__).resolve().parent.parent / "protos"


def _digest(sources: list[Path]) -> str:
    digest = hashlib.sha256()
    for name in ("grpcio-tools", "protobuf"):
        digest.update(f"{name}={metadata.version(name)}\n".encode())
    for source in sources:
        digest.update(source.name.encode() + b"\0" + source.read_bytes() + b"\0")
    return digest.hexdigest()[:20]


def _generate(sources: list[Path], target: Path) -> None:
    from grpc_tools import protoc

    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".generating-", dir=target.parent))
    try:
        source_root = work / "src"
        (source_root / PACKAGE).mkdir(parents=True)
        for source in sources:
            shutil.copyfile(source, source_root / PACKAGE / source.name)
        output = work / "out"
        (output / PACKAGE).mkdir(parents=True)
        (output / PACKAGE / "__init__.py").write_text('"""Generated from substrate-bench protos/."""\n')
        well_known = Path(protoc.__file__).parent / "_proto"
        arguments = [
            "grpc_tools.protoc",
            f"-I{source_root}",
            f"-I{well_known}",
            f"--python_out={output}",
            f"--pyi_out={output}",
            f"--grpc_python_out={output}",
            *(f"{PACKAGE}/{source.name}" for source in sources),
        ]
        if protoc.main(arguments) != 0:
            raise RuntimeError(f"protoc failed on {', '.join(str(s) for s in sources)}")
        try:
            os.rename(output, target)
        except OSError:
            if not (target / PACKAGE / "__init__.py").exists():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _load_package() -> ModuleType:
    if PACKAGE in sys.modules:
        return sys.modules[PACKAGE]
    sources = sorted(proto_directory().glob("*.proto"))
    if not sources:
        raise FileNotFoundError(f"no .proto files in {proto_directory()}")
    root = cache_directory("protos") / _digest(sources)
    init = root / PACKAGE / "__init__.py"
    if not init.exists():
        _generate(sources, root)
    spec = importlib.util.spec_from_file_location(
        PACKAGE, init, submodule_search_locations=[str(root / PACKAGE)]
    )
    assert spec is not None and spec.loader is not None
    package = importlib.util.module_from_spec(spec)
    sys.modules[PACKAGE] = package
    spec.loader.exec_module(package)
    return package


_load_package()
_MODULES = ("glutton_pb2", "ateapi_pb2", "ateapi_pb2_grpc", "glutton_pb2_grpc")
__all__ = [*_MODULES, "proto_directory"]


def __getattr__(name: str) -> ModuleType:
    # Loaded on first use: the *_grpc modules import grpc, which a glutton actor never needs.
    if name in _MODULES:
        module = importlib.import_module(f"{PACKAGE}.{name}")
        globals()[name] = module
        return module
    raise AttributeError(name)
