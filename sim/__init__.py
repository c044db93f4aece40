"""Everything that executes a program (imports ``hw`` and ``waveforms``, never ``compiler``).

* shared data types: :mod:`vtasim.sim.errors`, :mod:`vtasim.sim.result`, :mod:`vtasim.sim.image`, :mod:`vtasim.sim.program`,
  :mod:`vtasim.sim.builder`, :mod:`vtasim.sim.trace`;
* :mod:`vtasim.sim.engines`: the engine registry and contract, ``run_engine(name, image, **opts)`` and
  ``run_many(name, images, **opts)`` (options checked against each engine's declared ones) and
  ``check_result``;
* the engines: :mod:`vtasim.sim.functional` (the data oracle), :mod:`vtasim.sim.cycle` (cycle-accurate, numba),
  :mod:`vtasim.sim.rtl` (the Verilog RTL under cocotb);
* :mod:`vtasim.sim.diff`: first-divergence comparison of two runs;
* :mod:`vtasim.sim.programs`: unit, ResNet, random and TVM-imported programs;
* :mod:`vtasim.sim.cli`: the ``vtasim`` command modules (registered as ``vtasim.commands`` entry points).
"""
