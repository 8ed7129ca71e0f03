"""Authorization: the OpenFGA model, the client and the per-request gate."""
