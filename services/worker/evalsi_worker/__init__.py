"""evalsi-worker: pulls work.<pool>, runs targets and evaluators, publishes results; answers Evaluate requests."""
