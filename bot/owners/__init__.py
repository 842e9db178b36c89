"""For the people who own the documents: what citebot could not answer (the gaps report,
`citebot gaps`) and answers whose cited passage has changed since (stale citations)."""
