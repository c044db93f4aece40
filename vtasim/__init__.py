"""vtasim: a cycle-accurate VTA simulator, its Verilog RTL, co-verification and a compiler front end.

An installed wheel holds ``vtasim.hw``, ``vtasim.sim``, ``vtasim.compiler``, ``vtasim.waveforms`` and
``vtasim.config`` inside this package. In a source checkout those are the folders beside this one
(``hw/``, ``sim/``, ...): the package's search path then reaches them, so ``import vtasim.hw``
works from the repository without an install.
"""

import os as _os

_HERE = _os.path.dirname(_os.path.abspath(__file__))
if not _os.path.isdir(_os.path.join(_HERE, "hw")):
    __path__.append(_os.path.dirname(_HERE))  # noqa: F821 - a package's __path__
