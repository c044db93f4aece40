"""Scale-out on Dask: the cluster helper shared by ``vtasim fuzz`` (here) and the compiler's
``vtasim sweep`` / ``vtasim tune`` (which import it; ``sim`` never imports ``compiler``).

``cluster``  a Dask client on a LocalCluster of worker processes, or on an existing scheduler (address
             or scheduler file), with TLS settings passed through; the shared command-line options
``shrink``   reduce a diverging program to a minimal legal one that still diverges the same way
``fuzz``     ``vtasim fuzz --workers N | --scheduler ADDR``: seeds split across workers, coverage merged,
             every divergence shrunk and reported with the command that reproduces it

Dask is imported only inside functions: without the ``scale`` extra a command says
``pip install 'vtasim[scale]'``.
"""
