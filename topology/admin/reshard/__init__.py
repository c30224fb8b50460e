"""`admin reshard`: a live crawl moved to another partition count (`run.py` has the steps)."""
