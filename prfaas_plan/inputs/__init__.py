"""Everything read from or written to disk: atomic writes, bundled resources, the data catalog,
scenario files, trace and metrics readers, and the importers of benchmark results.
"""
