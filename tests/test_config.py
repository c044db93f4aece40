"""VTAConfig: derived quantities (hardware spec 1.2, 1.5) and every validation rule."""

import json

import pytest

from vtasim.hw.config import (ConfigError, MEM_ACC, MEM_ACC_8BIT, MEM_INP, MEM_OUT, MEM_UOP, MEM_WGT, VTAConfig,
                       PRESETS, default_config_path, get_config, load_config, load_preset, using_config)

PRESET_DIR = default_config_path().parent / "presets"
TVM_KEYS = ["TARGET", "HW_VER", "LOG_INP_WIDTH", "LOG_WGT_WIDTH", "LOG_ACC_WIDTH", "LOG_BATCH", "LOG_BLOCK",
            "LOG_UOP_BUFF_SIZE", "LOG_INP_BUFF_SIZE", "LOG_WGT_BUFF_SIZE", "LOG_ACC_BUFF_SIZE"]


def default_dict():
    return json.loads(default_config_path().read_text())


def test_default_file_is_tvms():
    d = default_dict()
    assert sorted(d) == sorted(TVM_KEYS)
    assert d == {"TARGET": "sim", "HW_VER": "0.0.2", "LOG_INP_WIDTH": 3, "LOG_WGT_WIDTH": 3, "LOG_ACC_WIDTH": 5,
                 "LOG_BATCH": 0, "LOG_BLOCK": 4, "LOG_UOP_BUFF_SIZE": 15, "LOG_INP_BUFF_SIZE": 15,
                 "LOG_WGT_BUFF_SIZE": 18, "LOG_ACC_BUFF_SIZE": 17}


def test_default_derived_values():
    c = load_config()
    assert c.bitstream == "1x16_i8w8a32_15_15_18_17"
    assert c.model == "sim_1x16_i8w8a32_15_15_18_17"
    assert (c.batch, c.block_in, c.block_out) == (1, 16, 16)
    assert (c.inp_elem_bits, c.wgt_elem_bits, c.acc_elem_bits, c.out_elem_bits) == (128, 2048, 512, 128)
    assert (c.uop_depth, c.inp_depth, c.wgt_depth, c.acc_depth, c.out_depth) == (8192, 2048, 1024, 2048, 2048)
    assert (c.log_uop_depth, c.log_inp_depth, c.log_wgt_depth, c.log_acc_depth) == (13, 11, 10, 11)
    assert c.log_out_buff_size == 15
    assert [c.dram_elem_bytes(m) for m in (MEM_UOP, MEM_WGT, MEM_INP, MEM_ACC, MEM_OUT, MEM_ACC_8BIT)] == \
        [4, 256, 16, 64, 16, 16]
    assert c.sram_elem_bytes(MEM_ACC_8BIT) == 64 and c.sram_depth(MEM_ACC_8BIT) == 2048
    d = c.derived()
    assert d["inp_dtype"] == "int8" and d["acc_dtype"] == "int32"
    # timing defaults of docs/timing.md section 1
    assert (c.LOG_BUS_WIDTH, c.DRAM_LATENCY, c.BURST_BEATS, c.CMD_QUEUE_DEPTH, c.TOKEN_QUEUE_DEPTH,
            c.FETCH_INSNS) == (6, 16, 16, 512, 255, 8)
    assert c.bus_bytes == 8


@pytest.mark.parametrize("name,bitstream,block,batch", [("1x16x16", "1x16_i8w8a32_15_15_18_17", 16, 1),
                                                        ("2x16x16", "2x16_i8w8a32_15_16_18_18", 16, 2),
                                                        ("1x32x32", "1x32_i8w8a32_15_16_20_18", 32, 1),
                                                        ("1x8x8", "1x8_i8w8a32_15_14_16_16", 8, 1)])
def test_presets(name, bitstream, block, batch):
    c = load_preset(name)
    assert c.bitstream == bitstream and c.block_in == block and c.batch == batch
    assert c.inp_elem_bytes == batch * block and c.wgt_elem_bytes == block * block
    assert c.acc_elem_bytes == 4 * batch * block


def write(tmp_path, d):
    p = tmp_path / "cfg.json"
    p.write_text(json.dumps(d))
    return p


@pytest.mark.parametrize("key", TVM_KEYS)
def test_missing_key(tmp_path, key):
    d = default_dict()
    del d[key]
    with pytest.raises(ConfigError, match=f"missing key '{key}'"):
        load_config(write(tmp_path, d))


@pytest.mark.parametrize("key,value,rule", [
    ("LOG_BLOCK", "4", "must be an integer"), ("LOG_BLOCK", 4.0, "must be an integer"),
    ("LOG_BATCH", True, "must be an integer"), ("TARGET", 3, "must be a string"),
    ("LOG_INP_WIDTH", 2, r"out of range \[3, 3\]"), ("LOG_ACC_WIDTH", 6, "out of range"),
    ("LOG_BLOCK", 0, "out of range"), ("LOG_BLOCK", 7, "out of range"), ("LOG_UOP_BUFF_SIZE", 1, "out of range"),
    ("TARGET", "gpu", "is not one of"), ("HW_VER", "0.0.3", "is not one of"),
    ("BURST_BEATS", 12, "power of two"), ("CMD_QUEUE_DEPTH", 0, "out of range"),
    ("DRAM_LATENCY", -1, "out of range"), ("LOG_BUS_WIDTH", 10, "out of range"),
    ("SOMETHING", 1, "unknown key 'SOMETHING'"),
])
def test_bad_value(tmp_path, key, value, rule):
    d = default_dict()
    d[key] = value
    with pytest.raises(ConfigError, match=rule) as e:
        load_config(write(tmp_path, d))
    assert key in str(e.value) and "\n" not in str(e.value)


@pytest.mark.parametrize("change,what", [
    ({"LOG_ACC_BUFF_SIZE": 18}, "GEMM instruction needs 66 bits in word 1"),
    ({"LOG_UOP_BUFF_SIZE": 16}, "instruction needs .* bits"),
    ({"LOG_WGT_BUFF_SIZE": 19}, "GEMM instruction needs 66 bits"),
    ({"LOG_INP_BUFF_SIZE": 16}, "GEMM instruction needs 66 bits"),
    # instructions fit (acc depth > inp depth), but the uop needs 11 + 11 + 11 bits
    ({"LOG_WGT_BUFF_SIZE": 19, "LOG_INP_BUFF_SIZE": 9}, "micro-op needs 33 bits"),
])
def test_isa_overflow(tmp_path, change, what):
    d = default_dict()
    d.update(change)
    with pytest.raises(ConfigError, match=what) as e:
        load_config(write(tmp_path, d))
    assert "overflow the ISA" in str(e.value)
    for key, value in change.items():
        assert f"{key}={value}" in str(e.value)


def test_not_json_and_not_object(tmp_path):
    p = tmp_path / "c.json"
    p.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        load_config(p)
    p.write_text("[1]")
    with pytest.raises(ConfigError, match="top level must be a JSON object"):
        load_config(p)
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "missing.json")
    p.write_bytes(b'\xff\xfe{"TARGET": "sim"}')           # binary / UTF-16 file
    with pytest.raises(ConfigError, match="byte 0 is not UTF-8"):
        load_config(p)


def test_round_trip_and_replace():
    c = load_config()
    assert VTAConfig.from_dict(c.to_dict()) == c
    assert c.to_dict(timing=False) == default_dict()
    c2 = c.replace(DRAM_LATENCY=3)
    assert c2.DRAM_LATENCY == 3 and c2.bitstream == c.bitstream
    with pytest.raises(ConfigError):
        c.replace(LOG_BLOCK=9)


def test_using_config():
    base = get_config()
    other = load_config(PRESET_DIR / "1x8x8.json")
    with using_config(other):
        assert get_config() is other
        with using_config(PRESET_DIR / "2x16x16.json") as inner:
            assert get_config() is inner and inner.batch == 2
        assert get_config() is other
    assert get_config() == base


def test_the_config_context_is_per_thread_and_shared_with_the_compiler_environment():
    """One config context (a context variable): two threads inside using_config / ``with Environment``
    of different configs each see their own, the compiler's get_env agrees with get_config, and a
    thread that entered nothing sees the default."""
    import threading

    from vtasim.compiler.dsl.environment import Environment, get_env
    small, wide = load_preset("1x8x8"), load_preset("2x16x16")
    inside, recorded = threading.Barrier(3), threading.Barrier(3)   # timeouts below only detect hangs
    seen = {}

    def worker(name, cfg, use_env):
        ctx = Environment(cfg) if use_env else using_config(cfg)
        with ctx:
            inside.wait(timeout=60)              # all three threads are inside their blocks at once
            seen[name] = (get_config(), get_env().cfg)
            recorded.wait(timeout=60)
        seen[name + " after"] = get_config()

    def idle():
        inside.wait(timeout=60)
        seen["idle"] = get_config()
        recorded.wait(timeout=60)

    threads = [threading.Thread(target=worker, args=("a", small, False)),
               threading.Thread(target=worker, args=("b", wide, True)), threading.Thread(target=idle)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen["a"] == (small, small) and seen["b"] == (wide, wide)
    assert seen["idle"] == load_config() and seen["a after"] == seen["b after"] == load_config()
    assert Environment(small) is Environment(load_preset("1x8x8"))


def test_load_preset_names_every_shipped_preset_and_only_those():
    """vtasim.hw.config.PRESETS is the directory's listing; the default config is the 1x16x16 preset."""
    assert sorted(PRESETS) == sorted(p.stem for p in PRESET_DIR.glob("*.json"))
    assert load_preset("1x16x16") == load_config()
    with pytest.raises(ConfigError, match=r"preset '3x3' is not one of 1x16x16, 2x16x16, 1x32x32, 1x8x8"):
        load_preset("3x3")
