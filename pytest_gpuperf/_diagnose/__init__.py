"""Explaining a failed gate: the binaries and resources of the kernels that moved, their SASS
difference, and the search for the commit that slowed a test down (``gpuperf bisect``)."""
