"""URLs: the canonicalizer, scope patterns, trap shapes and the crawl's scope. Pure, no I/O."""
