"""udfs."""
