"""The numba cache stamp of the cycle engine's compiled code covers the files compiled into it, so
an edit to the kernels or the layout constants cannot leave a stale event loop in the cache."""

from sim.cycle import core, jitcache, kernels


def test_core_stamp_covers_kernels(tmp_path, monkeypatch):
    loc = core.run_slice._cache._impl.locator
    assert isinstance(loc, jitcache._Stamped)
    assert isinstance(kernels.gemm_kernel._cache._impl.locator, jitcache._Stamped)
    before = loc.get_source_stamp()
    edited = tmp_path / "kernels.py"
    edited.write_bytes((jitcache._HERE / "kernels.py").read_bytes() + b"\n# edited\n")
    deps = tuple(edited if p.name == "kernels.py" else p for p in jitcache._DEPS)
    assert deps != jitcache._DEPS
    monkeypatch.setattr(jitcache, "_DEPS", deps)
    assert loc.get_source_stamp() != before
    assert loc.get_source_stamp()[0] == before[0]          # core.py itself is unchanged
