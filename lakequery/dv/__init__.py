"""Deletion vectors: descriptors, Z85, the RoaringBitmapArray format and DV files (digest §11)."""
