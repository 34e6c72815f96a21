"""lakequery."""
