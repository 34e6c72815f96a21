"""Delta Lake protocol: log actions, features, schema, partition values."""
