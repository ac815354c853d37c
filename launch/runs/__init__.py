"""A run's records and files: storage (local or Cloud Storage), the run manifest, fault records, checkpoints, policy snapshots and loggers."""
