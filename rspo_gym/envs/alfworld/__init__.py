"""ALFWorld 0.4 as a fast pure-Python engine: real game files, a generator, experts, a Gym env."""
