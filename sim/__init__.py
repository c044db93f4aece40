"""Everything that executes a program (imports ``hw`` and ``waveforms``, never ``compiler``).

* shared data types: :mod:`sim.errors`, :mod:`sim.result`, :mod:`sim.image`, :mod:`sim.program`,
  :mod:`sim.builder`, :mod:`sim.trace`;
* :mod:`sim.engines`: the engine registry and contract, ``run_engine(name, image, **opts)`` and
  ``run_many(name, images, **opts)`` (options checked against each engine's declared ones) and
  ``check_result``;
* the engines: :mod:`sim.functional` (the data oracle), :mod:`sim.cycle` (cycle-accurate, numba),
  :mod:`sim.rtl` (the Verilog RTL under cocotb);
* :mod:`sim.diff`: first-divergence comparison of two runs;
* :mod:`sim.programs`: unit, ResNet, random and TVM-imported programs;
* :mod:`sim.cli`: the ``vtasim`` command modules (registered as ``vtasim.commands`` entry points).
"""
