"""Local stand-ins for services this machine cannot reach, and a test embedder.

For tests and benchmarks only; no production module imports this package.
"""
