"""The build engines: local processes and Ray Data, and the progress they report."""
