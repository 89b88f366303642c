"""One use-case per command: takes typed inputs, returns a typed result; parses nothing, prints
nothing.
"""
