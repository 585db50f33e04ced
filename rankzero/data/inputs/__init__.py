"""Inputs: files found and read into records, sources mixed and split, the disk a build needs."""
