"""Studies over many scenarios (`prfaas-plan sweep`): the sweep file, its points, their execution
in chunks (locally or on a Dask cluster) and the Parquet dataset they write."""
