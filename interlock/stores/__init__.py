"""Storage adapters that plug into eventsourcing's persistence modules."""
