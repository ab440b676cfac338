"""Market analysis without K-lines in the context (seed 004): tools read and snapshot the
bars server-side, compute MA/EMA crossovers over the snapshot, and return a reference, a
summary and one page the model reads."""
