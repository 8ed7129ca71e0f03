"""The leak suite: probes every path by which a caller could learn what it may not see."""
