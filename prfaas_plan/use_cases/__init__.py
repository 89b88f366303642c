"""One use-case per command: a typed request in (requests.py, each field's meaning in
field_docs.py), a typed report out (calls.py; optimize also in a batched form for sweeps);
parses nothing, prints nothing.
"""
