"""The ``wayfinder`` command: the composition root, at the top of the layer stack."""
