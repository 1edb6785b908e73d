"""The evaluation harness: the pytest plugin and its options, sessions that run grid
cases into a run's store, the pipelines that turn an item into a record, the
regression gate, the run manifest, progress, cost control and shard merging."""
