"""What a run evaluates: model targets and agents."""
