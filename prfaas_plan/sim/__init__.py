"""The discrete-event simulator: arrivals, FIFO pools and the shared link, routing policies, the
engine, PD re-balancing, policy comparison. numpy only, no file I/O.
"""
