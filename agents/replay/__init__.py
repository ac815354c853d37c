"""The shared prioritised replay: its Reverb tables, the actors' adders, shards and eviction."""
