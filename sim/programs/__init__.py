"""Program generators that write memory images (operators and ResNet layers come from the compiler).

* :mod:`vtasim.sim.programs.unit`: TVM's unit tests (hardware spec 7.1) and hardware tests (7.2), each with
  its numpy reference and fsim counters;
* :mod:`vtasim.sim.programs.synthetic`: a GEMM-bound stream (the engines' speed bound);
* :mod:`vtasim.sim.programs.randprog`: random legal programs with coverage bins (what ``vtasim fuzz`` runs);
* :mod:`vtasim.sim.programs.tvm_import`: TVM's instruction buffers, DRAM dumps and DUMP_INSN text.
"""
