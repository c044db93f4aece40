"""Design-space sweeps on Dask: ``vtasim sweep SPEC`` and ``vtasim dse RESULTS``.

``spec``     parse and check a sweep spec (TOML or JSON) into points
``point``    evaluate one point (validate the config, compile, run the cycle engine, metrics, area proxy)
``results``  the results CSV: appended row by row, read back to resume
``runner``   map the missing points over a Dask cluster (a LocalCluster or an existing scheduler)
``pareto``   Pareto fronts, sensitivity plots and the front table (``vtasim dse``)
``cli``      the two commands (registered by :func:`vtasim.compiler.cli.add_commands`)

Dask is imported only inside :mod:`.runner`'s functions: without the ``scale`` extra the commands
say ``pip install 'vtasim[scale]'``.
"""
