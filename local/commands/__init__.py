"""The ``scheduler-dedup`` command line and one module per subcommand. The top layer of ``local``.
"""
