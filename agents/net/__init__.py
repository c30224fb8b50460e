"""The network: aiohttp fetches of pages and robots.txt, the SSRF guard, and the stage that turns
one dispatch into a report. The only layer of the stages that imports aiohttp."""
