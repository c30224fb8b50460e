"""One crawl's compiled rules: its policy with the canonicalizer, scope and robots cache it
implies."""
