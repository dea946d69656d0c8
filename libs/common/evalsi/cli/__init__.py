"""The ``evalsi`` command line: one module per verb, each parsing, calling the library and rendering."""
