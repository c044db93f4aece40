"""Program generators that write memory images (the compiler's output will join them).

* :mod:`sim.programs.unit`: TVM's unit tests (hardware spec 7.1) and hardware tests (7.2), each with
  its numpy reference and fsim counters;
* :mod:`sim.programs.resnet`: the ResNet-18 C2-C11 conv streams (spec 7.3) and a GEMM-bound stream,
  hand-written until the compiler replaces them;
* :mod:`sim.programs.randprog`: random legal programs with coverage bins (what ``vtasim fuzz`` runs);
* :mod:`sim.programs.tvm_import`: TVM's instruction buffers, DRAM dumps and DUMP_INSN text.
"""
