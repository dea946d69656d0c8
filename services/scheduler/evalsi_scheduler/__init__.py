"""evalsi-scheduler: plans runs into tasks, folds results into the store, finishes runs; leases share the work."""
