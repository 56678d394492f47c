"""Generate the Python modules of the native protocol into ``halfmq_proto/v1``.

Usage: ``python scripts/gen_proto.py [OUTPUT_ROOT]`` (default: the repository root).
The sources live in ``proto/halfmq/v1``; the generated package is ``halfmq_proto.v1`` because a
top-level package named ``proto`` collides with the proto-plus library.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from grpc_tools import protoc

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ROOT / "proto"


def generate(output_root: Path) -> Path:
    """Write ``halfmq_proto/v1/*`` under ``output_root`` and return that folder."""
    target = output_root / "halfmq_proto" / "v1"
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        protos = sorted(str(p.relative_to(SOURCES)) for p in SOURCES.rglob("*.proto"))
        code = protoc.main(
            ["protoc", f"-I{SOURCES}", f"--python_out={tmp}", f"--pyi_out={tmp}", f"--grpc_python_out={tmp}", *protos]
        )
        if code != 0:
            raise SystemExit(f"protoc failed with exit code {code}")
        for generated in sorted((Path(tmp) / "halfmq" / "v1").iterdir()):
            text = generated.read_text().replace("from halfmq.v1 import", "from halfmq_proto.v1 import")
            (target / generated.name).write_text(text)
    (target.parent / "__init__.py").write_text('"""Generated protocol modules (scripts/gen_proto.py)."""\n')
    (target / "__init__.py").write_text('"""halfmq native protocol v1, generated from proto/halfmq/v1."""\n')
    return target


if __name__ == "__main__":
    print(generate(Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT))
