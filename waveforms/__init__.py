"""Formats that viewers open, written from retire traces; imports ``hw`` only.

* :mod:`vtasim.waveforms.vcd`: the cycle engine's run as a VCD with the RTL's signal names;
* :mod:`vtasim.waveforms.gtkw`: a GTKWave save file for the model's or the RTL's waveforms;
* :mod:`vtasim.waveforms.plot`: timeline PNGs (matplotlib, the ``plot`` extra);
* :mod:`vtasim.waveforms.breakdown`: the per-module cycle breakdown as shares (the table and the plot).
"""
