"""The answer pipeline: one grounded turn from question to checked answer."""
