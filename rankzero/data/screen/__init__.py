"""The screen: personal information masked, benchmark items and eval overlap found, and their scans."""
