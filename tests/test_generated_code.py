"""The committed protocol modules are exactly what scripts/gen_proto.py makes from proto/."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_generated_modules_match_the_proto_sources(tmp_path):
    spec = importlib.util.spec_from_file_location("gen_proto", ROOT / "scripts" / "gen_proto.py")
    assert spec is not None and spec.loader is not None
    gen_proto = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen_proto)
    fresh = gen_proto.generate(tmp_path)
    committed = ROOT / "halfmq_proto" / "v1"
    assert sorted(p.name for p in fresh.iterdir()) == sorted(p.name for p in committed.iterdir() if p.is_file())
    for generated in fresh.iterdir():
        assert generated.read_text() == (committed / generated.name).read_text(), f"{generated.name} is stale"
