"""What the chip is: the bottom layer, importing nothing outside ``hw``.

* :mod:`vtasim.hw.config`: ``VTAConfig`` from a TVM ``vta_config.json`` (``load_config``, ``load_preset``);
* :mod:`vtasim.hw.fields`: the ISA's bit-field rule and the widths that do not depend on the config;
* :mod:`vtasim.hw.isa`: instruction and uop layouts, encode/decode, the dependency-token topology;
* :mod:`vtasim.hw.disasm`: TVM's DUMP_INSN listing and an assembler that reads it back;
* :mod:`vtasim.hw.rtl_params`, :mod:`vtasim.hw.rtl_report`: the RTL's generated header and its checks against
  the config; ``hw/rtl/*.v`` the Verilog VTA, ``hw/rtl/tb/tb_top.v`` its HDL testbench.

Layers: ``hw`` <- ``waveforms`` <- ``sim`` <- ``compiler`` (``tests/test_layers.py``).
"""
