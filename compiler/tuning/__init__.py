"""Schedule knobs, the workload catalogue and the knob search of ``vtasim tune``."""
