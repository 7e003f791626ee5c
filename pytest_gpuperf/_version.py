"""The package's version, in a module of its own so that code below the public facade can read it."""

__version__ = "0.2.0"
