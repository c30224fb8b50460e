"""robots.txt (RFC 9309), meta robots and X-Robots-Tag decisions. Pure: the file is fetched in
``agents.net``."""
